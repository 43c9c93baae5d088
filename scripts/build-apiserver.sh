#!/usr/bin/env bash
# kube-apiserver 1.20 and etcd for the test cluster (scripts/build-kube.sh); prints its path.
exec bash "$(dirname "$0")/build-kube.sh" kube-apiserver

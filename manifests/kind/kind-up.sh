#!/usr/bin/env bash
# Create the kind cluster, give every worker 8 fake GPUs and its pool taint, build and load the
# operator image, and deploy rackwise with the kind overlay. Needs docker and kind.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "kind-up: needs a running Docker engine" >&2; exit 2; }
command -v kind >/dev/null || { echo "kind-up: needs kind (https://kind.sigs.k8s.io)" >&2; exit 2; }
kind get clusters | grep -qx rackwise || kind create cluster --config manifests/kind/cluster.yaml
docker build -t rackwise:dev -f operator/Dockerfile .
kind load docker-image rackwise:dev --name rackwise
for node in $(kubectl get nodes -l rackwise.io/rack -o name); do
  name=${node#node/}
  pool=$(kubectl get "$node" -o jsonpath='{.metadata.labels.rackwise\.io/pool}')
  kubectl taint node "$name" "rackwise.io/pool=${pool}:NoSchedule" --overwrite
  # extended resources are advertised through the node status (what a device plugin does)
  kubectl patch "$node" --subresource=status --type=json \
    -p '[{"op":"add","path":"/status/capacity/nvidia.com~1gpu","value":"8"}]'
done
kubectl apply -k manifests/overlays/kind
kubectl -n rackwise-system rollout status deploy/rackwise-operator --timeout=180s

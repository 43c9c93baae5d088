"""Tools for developing and testing rackwise, never imported by the operator's runtime
(import-linter checks it): a local control plane without Docker (cluster.py), `rackwise
dev-cluster` (devcluster.py), and fake nodes and a stand-in kubelet (fake.py)."""

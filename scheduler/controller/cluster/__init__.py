"""What the operator knows of the cluster: hosts, their capacity and what holds it (state,
ledger), node lifecycle, which namespaces it may schedule, and the invariants it keeps."""

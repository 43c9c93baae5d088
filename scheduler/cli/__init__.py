"""The `rackwise` command line: thin adapters over place(), the simulator and the operator."""

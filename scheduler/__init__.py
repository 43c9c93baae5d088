"""rackwise: topology-aware gang placement for AI clusters."""

__version__ = "0.1.0"

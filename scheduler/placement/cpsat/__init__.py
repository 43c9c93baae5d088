"""The CP-SAT placement policy."""

from scheduler.placement.cpsat.solve import solve

__all__ = ["solve"]

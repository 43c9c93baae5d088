"""The scheduling queue: ordering, patience, backoff, backfill with reservations and
topology-aware preemption, driven alike by the operator and the simulator."""

from scheduler.model.policy import Backfill, Preemption
from scheduler.queue.queue import SchedulingQueue
from scheduler.queue.running import RunningGangs
from scheduler.queue.types import (
    Decisions,
    Eviction,
    Move,
    QueueConfig,
    Reservation,
    Running,
    Wait,
    WaitReason,
)

__all__ = [
    "Backfill",
    "Decisions",
    "Eviction",
    "Move",
    "Preemption",
    "QueueConfig",
    "Reservation",
    "Running",
    "RunningGangs",
    "SchedulingQueue",
    "Wait",
    "WaitReason",
]

"""Which team Queue admitted a running gang, as its bound pods record it.

The operator binds each pod with the annotation ADMITTED (a Binding's annotations are copied
onto the pod by the API server), so that a gang stays charged to the queue that admitted it
whatever later becomes of the Queues, across operator restarts and leader changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # objects.py imports the gateway, which imports this
    from scheduler.controller.runtime.objects import Pod

ADMITTED = "rackwise.io/admitted-by"


def admitted_by(pods: Iterable[Pod]) -> str:
    """The queue its bound pods name ("": none recorded, e.g. bound before teams were on)."""
    return next((p.meta.annotations[ADMITTED] for p in pods if ADMITTED in p.meta.annotations), "")

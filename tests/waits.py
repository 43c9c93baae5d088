"""Waiting in tests for something to happen, on machines that are sometimes busy: no wall-clock
threshold. A wait's allowance is given for an idle machine and stretches with the load (the
1-minute load average per core, when above 1), measured again while waiting: the same test
that needs 20 s at a load of 2 on 2 cores gets the time it needs at a load of 10."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def busy() -> float:
    """How many times slower than idle the machine is likely to be now (at least 1)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def until(what: str, found: Callable[[], T | None], allowance_s: float, poll_s: float = 0.2) -> T:
    """`found()`'s first truthy answer; AssertionError naming `what` once the allowance,
    stretched by the load seen while waiting, has passed."""
    start, stretch = time.monotonic(), 1.0
    while True:
        answer = found()
        if answer:
            return answer
        stretch = max(stretch, busy())
        if time.monotonic() - start > allowance_s * stretch:
            raise AssertionError(
                f"timed out waiting for {what} ({allowance_s:.0f} s x {stretch:.1f})"
            )
        time.sleep(poll_s)

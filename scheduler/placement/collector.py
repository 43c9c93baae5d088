"""The cyclic garbage collector, paused while one gang is placed.

A placement makes tens of thousands of short-lived objects (tree nodes and their vectors, pod
assignments), none of them in a reference cycle, on a heap that holds the whole fabric: a
cyclic collection that starts mid-placement scans that heap and can cost more than the
placement (at 400k GPUs, a third of the solve). Reference counting frees whatever a placement
drops; the collector runs again when it is done, and finds the cycles anything else made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()

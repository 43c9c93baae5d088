"""The queue's array edits (queue/arrays.py) give what np.insert and np.delete give."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.queue.arrays import cut, inserted


@pytest.mark.parametrize("seed", range(30))
def test_edits_equal_numpys(seed):
    rng = random.Random(seed)
    n = rng.randint(0, 12)
    flat = np.array([rng.randint(-5, 9) for _ in range(n)], dtype=np.int64)
    rows = np.array([[rng.randint(0, 9) for _ in range(3)] for _ in range(n)], dtype=np.int64)
    rows = rows.reshape(n, 3)
    at = rng.randint(0, n)
    k = rng.randint(0, 3)
    values = np.array([rng.randint(0, 9) for _ in range(k)], dtype=np.int64)
    block = np.array([[rng.randint(0, 9)] * 3 for _ in range(k)], dtype=np.int64).reshape(k, 3)
    assert np.array_equal(inserted(flat, at, values), np.insert(flat, at, values))
    assert np.array_equal(inserted(flat, at, 7), np.insert(flat, at, 7))
    assert np.array_equal(inserted(rows, at, block), np.insert(rows, at, block, axis=0))
    assert inserted(flat, at, 7.0).dtype == flat.dtype
    stop = rng.randint(at, n)
    span = np.arange(at, stop)
    assert np.array_equal(cut(flat, at, stop), np.delete(flat, span))
    assert np.array_equal(cut(rows, at, stop), np.delete(rows, span, axis=0))


def test_a_float_array_keeps_its_nan():
    estimates = np.array([1.0, 2.0])
    assert np.isnan(inserted(estimates, 1, np.nan)[1])

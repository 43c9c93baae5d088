"""The modern mix (simulation/synthetic.py): every job's shape fits its GPUs and the fabric's
hosts, the classes appear in their stated shares, and a seed repeats."""

from __future__ import annotations

from collections import Counter

import pytest

from scheduler.simulation.synthetic import MODERN, modern_mix
from scheduler.topology.traffic import compute_seconds, step_bytes


def kind(job_id: str) -> str:
    return job_id.rstrip("0123456789")


def test_a_seed_repeats_and_another_differs():
    assert modern_mix(3, 1.0, largest=1024) == modern_mix(3, 1.0, largest=1024)
    assert modern_mix(3, 1.0, largest=1024) != modern_mix(4, 1.0, largest=1024)


@pytest.mark.parametrize("host_gpus", [4, 8])
def test_every_shape_fits_its_job_and_the_hosts(host_gpus):
    for job in modern_mix(0, 4.0, largest=1024):
        gang = job.gang(host_gpus)  # the gang's own checks: dp x tp x pp = GPUs, TP groups
        if job.shape is None:
            assert job.gpus <= 8
            assert job.model is None
            continue
        assert job.shape.gpus == job.gpus
        assert gang.shape == job.shape
        assert job.shape.dp % job.shape.ep == 0
        assert job.model is not None
        assert compute_seconds(job.model, job.shape) > 0
        step = step_bytes(job.model, job.shape)
        assert step.tensor + step.expert + step.pipeline + step.data > 0


def test_sizes_stay_within_the_largest_and_classes_keep_their_shares():
    jobs = modern_mix(0, 20.0, largest=256)
    assert max(j.gpus for j in jobs) <= 256
    counts = Counter(kind(j.id) for j in jobs)
    for name, (share, _, _) in MODERN.items():
        assert counts[name] / len(jobs) == pytest.approx(share, abs=0.04), name


def test_a_small_fabric_gets_no_class_too_large_for_it():
    jobs = modern_mix(0, 4.0, largest=64)
    assert max(j.gpus for j in jobs) <= 64
    assert not [j for j in jobs if kind(j.id) == "pretrain"]

"""Trace loaders and input errors: file and line named, or counted with skip_bad_rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.simulation.trace import TraceError, load_trace, pods_for, transform

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_philly_sample_loads_sorted():
    report = load_trace(REPO / "simulations/traces/philly-week.csv", "philly")
    assert len(report.jobs) == 11217
    assert report.bad_rows == 0
    assert [j.submit_s for j in report.jobs] == sorted(j.submit_s for j in report.jobs)


def test_a_repeated_job_id_is_a_bad_row(tmp_path):
    """A second job with an id already used would be taken for the first: it is refused (or
    skipped with skip_bad_rows), naming both lines."""
    path = write(tmp_path, "t.csv", "id,submit_s,duration_s,gpus\na,0,10,8\nb,5,3,8\na,6,3,8\n")
    with pytest.raises(TraceError, match=r"t.csv:4: id 'a' is already the job of line 2"):
        load_trace(path, "rackwise")
    report = load_trace(path, "rackwise", skip_bad_rows=True)
    assert [j.id for j in report.jobs] == ["a", "b"]
    assert report.bad_rows == 1


def test_openb_maps_qos_to_pools():
    report = load_trace(REPO / "simulations/traces/openb-pods.csv", "openb")
    pools = {j.pool for j in report.jobs}
    assert pools == {"online-inference", "batch-inference"}
    # LS pods with GPUs: 4,011 (3,959 + 15 + 14 + 23 in the README; CPU-only LS pods skipped)
    assert sum(j.pool == "online-inference" for j in report.jobs) == 4011


def test_bad_row_names_file_and_line(tmp_path):
    path = write(tmp_path, "t.csv", "id,submit_s,duration_s,gpus\na,0,10,8\nb,5,-3,8\n")
    with pytest.raises(TraceError, match=r"t.csv:3: duration_s: Input should be greater than 0"):
        load_trace(path, "rackwise")
    report = load_trace(path, "rackwise", skip_bad_rows=True)
    assert [j.id for j in report.jobs] == ["a"]
    assert report.bad_rows == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,submit_s,duration_s,gpus,pool\na,0,10,8,gpu-pool\n", "unknown pool"),
        ("id,submit_s,duration_s,gpus,pods\na,0,10,8,3\n", "does not divide"),
        ("id,submit_s,gpus\na,0,8\n", "duration_s: Field required"),
        ("id,submit_s,duration_s,gpus\na,zero,10,8\n", "submit_s: Input should be a valid number"),
    ],
)
def test_rackwise_format_errors(tmp_path, text, message):
    with pytest.raises(TraceError, match=message):
        load_trace(write(tmp_path, "t.csv", text), "rackwise")


def test_jsonl_and_bad_json_line(tmp_path):
    path = write(
        tmp_path, "t.jsonl", '{"id": "a", "submit_s": 0, "duration_s": 5, "gpus": 2}\nnot json\n'
    )
    with pytest.raises(TraceError, match=r"t.jsonl:2: not JSON"):
        load_trace(path, "rackwise")


def test_philly_bad_timestamp(tmp_path):
    path = write(
        tmp_path, "p.csv", "timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,5,1,5,x\n"
    )
    with pytest.raises(TraceError, match=r"p.csv:2: time data 'yesterday'"):
        load_trace(path, "philly")


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(TraceError, match="No such file"):
        load_trace(tmp_path / "nope.csv", "philly")
    with pytest.raises(TraceError, match="unknown trace format"):
        load_trace(tmp_path / "nope.csv", "slurm")


def test_transform_window_scale_load_limit_clip(tmp_path):
    rows = "".join(f"j{i},{i * 3600},{1000 * (i + 1)},{i % 2 + 1}\n" for i in range(48))
    report = load_trace(
        write(tmp_path, "t.csv", "id,submit_s,duration_s,gpus\n" + rows), "rackwise"
    )
    jobs = transform(
        report.jobs, start_s=3600, days=0.5, scale=8, load=2.0, limit=5, max_duration_s=3000
    )
    assert [j.id for j in jobs] == ["j1", "j2", "j3", "j4", "j5"]
    assert [j.submit_s for j in jobs] == [0, 1800, 3600, 5400, 7200]
    assert [j.gpus for j in jobs] == [16, 8, 16, 8, 16]
    assert [j.duration_s for j in jobs] == [2000, 3000, 3000, 3000, 3000]


@pytest.mark.parametrize(("gpus", "pods"), [(1, 1), (8, 1), (16, 2), (12, 2), (24, 3), (7, 1)])
def test_pods_take_whole_hosts_where_possible(gpus, pods):
    assert pods_for(gpus, 8) == pods


def test_a_run_refuses_two_jobs_of_one_id():
    from scheduler.simulation.config import SimConfig
    from scheduler.simulation.engine import Simulation
    from scheduler.simulation.trace import TraceJob
    from scheduler.topology import Fabric, generate

    job = TraceJob(id="a", submit_s=0, duration_s=10, gpus=8)
    fabric = Fabric(generate(blocks=1, racks=1, hosts=2, gpus=8))
    with pytest.raises(ValueError, match="job ids must be unique"):
        Simulation(
            fabric, [job, job.model_copy(update={"submit_s": 5})], "rackwise", SimConfig.of()
        )

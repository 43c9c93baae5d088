"""A whole scenario through simulate(): files, schema, and the CLI's error paths."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from scheduler.simulation.api import simulate
from scheduler.simulation.metrics import WALL_CLOCK
from scheduler.simulation.scenario import ScenarioError, load_scenario
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[3]
SCENARIO = """
name: tiny
seed: 1
topology: {generate: {blocks: 2, racks: 2, hosts: 2, gpus: 8}}
pools: {training: 0.5, online-inference: 0.5}
traces:
  - {format: rackwise, path: jobs.csv}
policies: [rackwise, kueue-best-fit, first-fit]
"""
JOBS = "id,submit_s,duration_s,gpus,pool\n" + "".join(
    f"j{i},{i * 30},{300 + i * 11},{[8, 16, 1][i % 3]},{['training', 'online-inference'][i % 2]}\n"
    for i in range(30)
)


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    (tmp_path / "jobs.csv").write_text(JOBS)
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def test_simulate_writes_every_output(scenario, tmp_path):
    spec, base = load_scenario(scenario)
    out = tmp_path / "out"
    outcome = simulate(spec, base, out, workers=1)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["policies"]) == {"rackwise", "kueue-best-fit", "first-fit"}
    for m in metrics["policies"].values():
        assert {
            "jct_mean_s",
            "jct_p50_s",
            "jct_p99_s",
            "queue_delay_mean_s",
            "queue_delay_p99_s",
            "gpu_utilisation",
            "stranded_free_gpus_mean",
            "racks_per_multihost_gang_mean",
            "spines_per_multihost_gang_max",
            "cross_rack_gb",
            "cross_spine_gb",
            "decision_latency_p99_ms",
            "gap_to_bound_mean",
            "jobs_unplaced",
        } <= set(m)
        assert set(m["pools"]) == {"training", "online-inference"}
    with (out / "jobs.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 30 * 3
    for name in (
        "slowdown_by_size.png",
        "queueing_by_size.png",
        "utilisation.png",
        "spread.png",
        "cross_fabric_bytes.png",
    ):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    assert "| rackwise |" in (out / "report.md").read_text()
    assert "<table>" in (out / "report.html").read_text()
    assert outcome.metrics["rackwise"]["jobs_finished"] == 30


def test_parallel_workers_give_the_same_numbers(scenario, tmp_path):
    spec, base = load_scenario(scenario)
    one = simulate(spec, base, tmp_path / "a", workers=1).metrics
    two = simulate(spec, base, tmp_path / "b", workers=2).metrics
    for m in (*one.values(), *two.values()):
        for noisy in WALL_CLOCK:
            m.pop(noisy)
    assert one == two


def test_scenario_errors_name_the_field(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\ntopology: {}\ntraces: []\n")
    with pytest.raises(ScenarioError, match=r"s.yaml: topology: Value error, give exactly one"):
        load_scenario(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "nope.yaml"], "nope.yaml: No such file"),
        (["simulate", "--policies", "rackwise,magic"], "unknown ['magic']"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args, message, tmp_path):
    done = run_cli(*args, "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_cli_bad_trace_row_then_skip(scenario, tmp_path):
    (scenario.parent / "jobs.csv").write_text(JOBS + "bad,0,-1,8,training\n")
    done = run_cli("simulate", str(scenario), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"rackwise: error: {scenario.parent / 'jobs.csv'}:32: duration_s: "
        "Input should be greater than 0"
    )
    done = run_cli(
        "simulate",
        str(scenario),
        "--out",
        str(tmp_path / "o"),
        "--skip-bad-rows",
        "--policies",
        "rackwise",
    )
    assert done.returncode == 0, done.stderr
    assert "bad trace rows skipped: 1" in done.stdout


def test_a_run_that_measures_no_job_says_so(scenario, tmp_path):
    spec, base = load_scenario(scenario)
    spec = spec.model_copy(update={"warmup_s": 10**6, "policies": ["first-fit"]})
    outcome = simulate(spec, base, tmp_path / "out", workers=1)
    assert any(n.startswith("WARNING: no job was measured") for n in outcome.notes)
    measured = simulate(spec.model_copy(update={"warmup_s": 0.0}), base, tmp_path / "o2", workers=1)
    assert not any("no job was measured" in n for n in measured.notes)

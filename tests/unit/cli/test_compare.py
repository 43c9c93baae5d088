"""`rackwise compare` as a user runs it: a tiny scenario, the --json document under its stable
keys, a rerun that reads every run back, and bad input in one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

from scheduler.topology import generate, save_topology
from tests.conftest import run_cli

SCENARIO = """
name: tiny
seed: 3
topology:
  generate: {blocks: 2, racks: 2, hosts: 2, gpus: 8}
traces:
  - {format: llm-mix, days: 0.5, jobs: 40}
load: 0.9
warmup_s: 3600
policies: [rackwise, kueue-best-fit]
"""
KEYS = {
    "jct_mean_s",
    "jct_p95_s",
    "jct_mean_s_by_class",
    "jct_p95_s_by_class",
    "gpu_hours_lost",
    "large_gang_wait_mean_s",
    "large_gang_wait_p95_s",
    "large_gangs",
    "utilisation_steady",
    "bounded_slowdown_p95",
    "goodput",
    "makespan_s",
}


def compare(tmp_path: Path, *extra: str) -> tuple[dict, str]:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out.json"
    args = ("--seeds", "2", "--save", str(tmp_path / "runs"), "--json", str(out), "--workers", "1")
    done = run_cli("compare", str(scenario), *args, *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def test_the_document_holds_every_row_and_seed_under_stable_keys(tmp_path):
    doc, stdout = compare(tmp_path)
    assert set(doc["rows"]) == {"rackwise", "kueue-best-fit", "rackwise (none)", "oracle"}
    assert doc["seeds"] == [3, 4]
    for runs in doc["rows"].values():
        assert [r["seed"] for r in runs] == [3, 4]
        assert all(set(r) >= KEYS for r in runs)
        assert all(set(r["jct_mean_s_by_class"]) == {"host", "rack", "larger"} for r in runs)
    # the oracle never loses GPU-time to the fabric
    assert all(r["gpu_hours_lost"] == 0 for r in doc["rows"]["oracle"])
    assert {"measure", "baseline", "mean", "half_width_95", "verdict"} <= set(doc["ratios"][0])
    assert "oracle" in doc
    assert "rackwise (none)" in doc["variants"]
    assert "fabric oversubscribed" in stdout


def test_a_rerun_reads_every_run_back_and_gives_the_same_document(tmp_path):
    first, _ = compare(tmp_path)
    again, _stdout = compare(tmp_path)
    assert again["rows"] == first["rows"]
    # a row added later: the rows already saved are read back, only the new one runs
    saved = set((tmp_path / "runs").iterdir())
    more, _ = compare(tmp_path, "--policies", "rackwise,kueue-best-fit,first-fit")
    added = set((tmp_path / "runs").iterdir()) - saved
    assert sorted(p.name.split("-")[0] for p in added) == ["first", "first"]
    assert more["rows"]["rackwise"] == first["rows"]["rackwise"]


def test_the_profile_and_load_flags_reach_the_runs(tmp_path):
    doc, stdout = compare(tmp_path, "--profile", "non-blocking", "--load", "0.5", "--no-oracle")
    assert "oracle" not in doc["rows"]
    assert "fabric non-blocking; offered load 50%" in stdout
    assert doc["setup"]["scenario"]["fabric"]["name"] == "non-blocking"


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    done = run_cli("compare", str(scenario), "--policies", "rackwise,magic")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "unknown ['magic']" in done.stderr
    scenario.write_text(SCENARIO + "fabric: {name: flat}\n")
    done = run_cli("compare", str(scenario))
    assert done.returncode == 2
    assert "fabric.name" in done.stderr
    scenario.write_text(SCENARIO + "fabric: {ecmp: [galaxy]}\n")
    done = run_cli("compare", str(scenario))
    assert done.returncode == 2
    assert (
        "fabric.ecmp: unknown level 'galaxy'; levels are host, nvlink, rack, spine" in done.stderr
    )
    # rails need the demand model, and hosts of one size
    scenario.write_text(SCENARIO + "fabric: {rails: true}\n")
    done = run_cli("compare", str(scenario))
    assert done.returncode == 2
    assert "rails need `sharing: demand`" in done.stderr
    spec = generate(2, 2, 2, 8)
    hosts = (spec.hosts[0].model_copy(update={"gpus": 4}), *spec.hosts[1:])
    save_topology(spec.model_copy(update={"hosts": hosts}), tmp_path / "mixed.yaml")
    rails = "fabric: {sharing: demand, per_gpu_nic: true, rails: true}\n"
    mixed = SCENARIO.replace(
        "generate: {blocks: 2, racks: 2, hosts: 2, gpus: 8}", "file: mixed.yaml"
    )
    scenario.write_text(mixed + rails)
    done = run_cli("compare", str(scenario))
    assert done.returncode == 2
    assert "fabric.rails: rails need a NIC per GPU and as many GPUs on every host" in done.stderr
    # a knob of an earlier layout says where it went
    scenario.write_text(SCENARIO + "backfill: greedy\n")
    done = run_cli("compare", str(scenario))
    assert done.returncode == 2
    assert "backfill: now under `scheduling:`" in done.stderr


def test_a_sweep_on_a_local_ray_instance_equals_the_local_run(tmp_path):
    """The same tiny sweep as local processes and as Ray tasks (`--ray auto` starts a local
    Ray instance): every row's measures are the same, seed by seed."""
    for part in ("local", "ray"):
        (tmp_path / part).mkdir()
    local, _ = compare(tmp_path / "local")
    on_ray, _ = compare(tmp_path / "ray", "--ray", "auto")
    assert _decided(on_ray) == _decided(local)


def _decided(document: dict) -> dict:
    """Every row's measures but its wall time (the one that is not decided by the code)."""
    return {
        row: [{k: v for k, v in run.items() if k != "wall_seconds"} for run in runs]
        for row, runs in document["rows"].items()
    }


def test_a_trace_edited_in_place_is_run_again_not_read_back(tmp_path):
    """The saved runs depend on the trace file's content, not only its path."""
    trace = tmp_path / "jobs.jsonl"
    job = '{"id": "a", "submit_s": 0, "duration_s": %d, "gpus": 8}\n'
    scenario = tmp_path / "own.yaml"
    scenario.write_text(
        "name: own\ntopology:\n  generate: {blocks: 1, racks: 1, hosts: 2, gpus: 8}\n"
        "traces:\n  - {format: rackwise, path: jobs.jsonl}\npolicies: [rackwise]\nseeds: 1\n"
    )
    out = tmp_path / "out.json"
    args = ("--save", str(tmp_path / "runs"), "--json", str(out), "--no-oracle", "--variants", "")
    makespans = []
    for seconds in (100, 900):
        trace.write_text(job % seconds)
        done = run_cli("compare", str(scenario), *args)
        assert done.returncode == 0, done.stderr
        makespans.append(json.loads(out.read_text())["rows"]["rackwise"][0]["makespan_s"])
    assert makespans == [100, 900]


def test_jobs_that_never_finish_are_said_under_the_table(tmp_path):
    """A job in a pool without hosts never starts; no measure counts it, so the output says."""
    (tmp_path / "jobs.jsonl").write_text(
        '{"id": "a", "submit_s": 0, "duration_s": 100, "gpus": 8, "pool": "batch-inference"}\n'
        '{"id": "b", "submit_s": 5, "duration_s": 100, "gpus": 8}\n'
    )
    scenario = tmp_path / "own.yaml"
    scenario.write_text(
        "name: own\ntopology:\n  generate: {blocks: 1, racks: 1, hosts: 2, gpus: 8}\n"
        "traces:\n  - {format: rackwise, path: jobs.jsonl}\npolicies: [rackwise]\nseeds: 1\n"
    )
    args = ("--save", str(tmp_path / "runs"), "--no-oracle", "--variants", "")
    done = run_cli("compare", str(scenario), *args)
    assert done.returncode == 0, done.stderr
    assert "jobs that never finished (mean per seed): rackwise 1 of 2" in done.stdout


def test_an_empty_scenario_is_refused_and_an_empty_measure_window_said(tmp_path):
    trace = tmp_path / "jobs.jsonl"
    scenario = tmp_path / "own.yaml"
    own = (
        "name: own\ntopology:\n  generate: {blocks: 1, racks: 1, hosts: 2, gpus: 8}\n"
        "traces:\n  - {format: rackwise, path: jobs.jsonl}\npolicies: [rackwise]\nseeds: 1\n"
    )
    scenario.write_text(own)
    trace.write_text("")
    args = ("--save", str(tmp_path / "runs"), "--no-oracle", "--variants", "")
    done = run_cli("compare", str(scenario), *args)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "rackwise: error: own: no jobs: every trace is empty within its window "
        "(start_days, days, jobs)"
    )
    trace.write_text('{"id": "a", "submit_s": 0, "duration_s": 100, "gpus": 8}\n')
    scenario.write_text(own + "warmup_s: 3600\n")
    done = run_cli("compare", str(scenario), *args)
    assert done.returncode == 0, done.stderr
    assert "no job was submitted after the warm-up" in done.stdout

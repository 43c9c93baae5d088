"""`pip install` of rackwise's wheel into a fresh venv, run outside the checkout, as a user
installs it: `--version`, `simulate` on the bundled default scenario and its data, and
`dev-cluster up` / `down` (the control plane from the cached 1.20 binaries) leaving no process
behind. The wheel's dependencies come from the package index (pip's cache makes it quick)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def rackwise(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("install")
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / "dist", REPO)
    assert built.returncode == 0, built.stderr[-2000:]
    assert run(sys.executable, "-m", "venv", tmp / "venv").returncode == 0
    wheel = next((tmp / "dist").glob("rackwise-*.whl"))
    pip = tmp / "venv" / "bin" / "pip"
    installed = run(pip, "install", "-q", f"{wheel}[cluster]")
    assert installed.returncode == 0, installed.stderr[-2000:]
    return tmp / "venv" / "bin" / "rackwise"


def test_version(rackwise, tmp_path):
    out = run(rackwise, "--version", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "rackwise 0.1.0"


def test_the_wheel_writes_out_its_samples(rackwise, tmp_path):
    out = run(rackwise, "samples", "mine", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = sorted(p.name for p in (tmp_path / "mine").iterdir())
    assert written == sorted(p.name for p in (REPO / "manifests" / "samples").glob("*.yaml"))
    again = run(rackwise, "samples", "mine", cwd=tmp_path)
    assert again.returncode == 2
    assert "exist already" in again.stderr


def test_simulate_reads_the_bundled_default_scenario(rackwise, tmp_path):
    out = run(
        rackwise,
        "simulate",
        "--jobs",
        "20",
        "--policies",
        "rackwise,first-fit",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics  # measured, from data the checkout is nowhere near


def test_dev_cluster_up_and_down_leave_nothing_running(rackwise, tmp_path):
    topology = tmp_path / "topology.yaml"
    topology.write_text((REPO / "simulations" / "topologies" / "dev.yaml").read_text())
    state = tmp_path / "dev"
    up = run(rackwise, "dev-cluster", "up", "--topology", topology, "--dir", state, cwd=tmp_path)
    try:
        assert up.returncode == 0, up.stderr[-2000:]
        env = {**os.environ, "KUBECONFIG": str(state / "admin.kubeconfig")}
        nodes = subprocess.run(
            ["kubectl", "get", "nodes", "-o", "name"], capture_output=True, text=True, env=env
        )
        assert len(nodes.stdout.split()) == 24
    finally:
        down = run(rackwise, "dev-cluster", "down", "--dir", state, cwd=tmp_path)
    assert down.returncode == 0
    assert not running_with(str(state))


def running_with(text: str) -> list[int]:
    """Processes whose command line mentions `text` (the dev cluster's state folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in line:
            found.append(int(proc.name))
    return found

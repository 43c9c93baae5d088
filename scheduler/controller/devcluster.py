"""`rackwise dev-cluster up|down`: the test control plane as a local playground."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from scheduler.controller.cluster import OPERATOR_USER, REPO, LocalCluster
from scheduler.controller.config import OperatorConfig
from scheduler.controller.fake import create_nodes
from scheduler.controller.gateway import Gateway
from scheduler.model import TopologySpec

MANIFESTS = REPO / "manifests" / "base"


def operator_command(kubeconfig: Path, port: int, config: Path | None = None) -> list[str]:
    """`rackwise operator` as a separate process, from this checkout."""
    extra = ["--config", str(config)] if config else []
    return [
        sys.executable,
        "-m",
        "scheduler.cli.main",
        "operator",
        "--kubeconfig",
        str(kubeconfig),
        "--port",
        str(port),
        *extra,
    ]


def install(cluster: LocalCluster) -> None:
    """CRDs and the operator's RBAC, bound to the operator's token user."""
    cluster.kubectl("apply", "-f", str(MANIFESTS / "crds"))
    cluster.kubectl("apply", "-f", str(MANIFESTS / "rbac" / "clusterrole.yaml"))
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "rackwise-operator-user",
        "--clusterrole=rackwise-operator",
        f"--user={OPERATOR_USER}",
    )
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/trainingjobs.rackwise.io", "--timeout=60s"
    )


def up(workdir: Path, spec: TopologySpec) -> LocalCluster:
    cluster = LocalCluster.start(workdir)
    install(cluster)
    create_nodes(Gateway(cluster.admin_kubeconfig), spec, OperatorConfig())
    logs = workdir / "logs"
    pids = [
        _background(operator_command(cluster.operator_kubeconfig, 0), logs / "operator.log"),
        _background(
            [
                sys.executable,
                "-m",
                "scheduler.cli.main",
                "dev-cluster",
                "kubelet",
                "--kubeconfig",
                str(cluster.admin_kubeconfig),
            ],
            logs / "kubelet.log",
        ),
    ]
    state = json.loads((workdir / "cluster.json").read_text())
    state["pids"] = [*pids, *cluster.pids]
    (workdir / "cluster.json").write_text(json.dumps(state))
    return cluster


def down(workdir: Path) -> bool:
    if not (workdir / "cluster.json").exists():
        return False
    cluster = LocalCluster.attach(workdir)
    for pid in cluster.pids:
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            continue
    cluster.stop()
    (workdir / "cluster.json").unlink()
    return True


def _background(command: list[str], log: Path) -> int:
    with log.open("ab") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, cwd=REPO
        )
    return process.pid

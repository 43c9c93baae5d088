"""`rackwise dev-cluster up|down`: the test control plane as a local playground."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from scheduler.bundled import bundled
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import AdminGateway
from scheduler.devtools.cluster import OPERATOR_USER, REPO, LocalCluster
from scheduler.devtools.fake import create_nodes
from scheduler.model import TopologySpec

MANIFESTS = bundled("manifests/base")


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


def install(cluster: LocalCluster, namespaces: tuple[str, ...] = ("default",)) -> None:
    """CRDs and the operator's RBAC from manifests/base, bound to the operator's token user
    (in place of the ServiceAccount), serving the given namespaces."""
    cluster.kubectl("apply", "-f", str(MANIFESTS / "crds"))
    cluster.kubectl("apply", "-f", str(MANIFESTS / "namespace.yaml"))
    cluster.kubectl("apply", "-f", str(MANIFESTS / "rbac" / "clusterrole.yaml"))
    bindings = yaml.safe_load_all((MANIFESTS / "rbac" / "rolebinding.yaml").read_text())
    roles = [d for d in bindings if d and d["kind"] == "Role"]
    cluster.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": roles})
    )
    user = f"--user={OPERATOR_USER}"
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "rackwise-operator-user",
        "--clusterrole=rackwise-operator",
        user,
    )
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        "rackwise-queues-user",
        "--clusterrole=rackwise-queues",
        user,
    )
    cluster.kubectl(
        "create",
        "rolebinding",
        "rackwise-leader-election-user",
        "-n",
        "rackwise-system",
        "--role=rackwise-leader-election",
        user,
    )
    for namespace in namespaces:
        serve_namespace(cluster, namespace)
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/trainingjobs.rackwise.io", "--timeout=60s"
    )


def serve_namespace(cluster: LocalCluster, namespace: str) -> None:
    """What rolebinding.yaml does for `default`: the operator may run jobs in `namespace`."""
    cluster.kubectl(
        "create",
        "rolebinding",
        "rackwise-workloads-user",
        "-n",
        namespace,
        "--clusterrole=rackwise-workloads",
        f"--user={OPERATOR_USER}",
    )


def up(workdir: Path, spec: TopologySpec) -> LocalCluster:
    """The control plane with the real controllers and default scheduler, rackwise's CRDs and
    RBAC, the nodes, the operator and the fake kubelet; all stopped again if a step fails."""
    cluster = LocalCluster.start(workdir, controllers=True)
    try:
        install(cluster)
        create_nodes(AdminGateway(cluster.admin_kubeconfig), spec, OperatorConfig())
    except BaseException:
        cluster.stop()
        raise
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


class Replicas:
    """Operator replicas as separate processes, each with its own identity (POD_NAME), for the
    kill test and the soak: start them, find the leader from the Lease, SIGKILL it."""

    def __init__(self, cluster: LocalCluster, config: Path, logs: Path) -> None:
        self.cluster = cluster
        self.config = config
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started = 0

    def start(self) -> str:
        name = f"operator-{self.started}"
        self.started += 1
        command = operator_command(self.cluster.operator_kubeconfig, 0, self.config)
        with (self.logs / f"{name}.log").open("ab") as handle:
            self.procs[name] = subprocess.Popen(
                command,
                stdout=handle,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env={**os.environ, "POD_NAME": name},
            )
        return name

    def leader(self) -> str | None:
        lease = AdminGateway(self.cluster.admin_kubeconfig).get_lease(
            "rackwise-system", "rackwise-operator"
        )
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        return str(holder) if holder in self.procs else None

    def kill(self, name: str) -> None:
        process = self.procs.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait()

    def alive(self) -> list[str]:
        """Replicas still running; one that exited on its own is a failure to report."""
        return [n for n, p in self.procs.items() if p.poll() is None]

    def stop(self) -> None:
        for process in self.procs.values():
            process.terminate()
        for process in self.procs.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        self.procs.clear()

"""A local control plane without Docker: etcd + kube-apiserver 1.20 on loopback.

Used by the integration tests, the operator benchmark and `rackwise dev-cluster`. The API server
is built once from Debian's `kubernetes` source package (scripts/build-apiserver.sh, cached under
~/.cache/rackwise). Two token users: `admin` (system:masters) and `rackwise-operator`, which has
no rights beyond the RBAC rules in manifests/base/rbac once those are applied.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from scheduler.bundled import bundled

OPERATOR_USER = "rackwise-operator"
REPO = Path(__file__).resolve().parents[2]


class ClusterError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def apiserver_binary() -> Path:
    """kube-apiserver 1.20 (RACKWISE_APISERVER names another)."""
    given = os.environ.get("RACKWISE_APISERVER")
    return Path(given) if given else kube_binary("kube-apiserver")


def kube_binary(name: str) -> Path:
    """A Kubernetes 1.20 server binary, built from Debian's source (scripts/build-kube.sh) on
    first use and cached; RACKWISE_KUBE_CONTROLLER_MANAGER or RACKWISE_KUBE_SCHEDULER name
    another. A failed build is a ClusterError with the build's last line."""
    given = os.environ.get("RACKWISE_" + name.upper().replace("-", "_"))
    if given:
        return Path(given)
    cached = Path.home() / ".cache" / "rackwise" / f"{name}-1.20"
    if cached.exists():
        return cached
    out = subprocess.run(
        ["bash", str(bundled("scripts/build-kube.sh")), name],
        check=False,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise ClusterError(f"could not build {name} (scripts/build-kube.sh): {last}")
    return Path(out.stdout.strip().splitlines()[-1])


# the controllers a workload needs (Jobs, StatefulSets, Deployments, owners' garbage); the node
# lifecycle controller stays off: the test cluster's kubelets are simulated
CONTROLLERS = "job,garbagecollector,replicaset,deployment,statefulset,podgc,cronjob"
CONTROL_PLANE = ("kube-controller-manager", "kube-scheduler")


@dataclass
class LocalCluster:
    """Start with `LocalCluster.start(workdir)`, stop with `.stop()`."""

    workdir: Path
    port: int
    admin_token: str
    operator_token: str
    pids: list[int]

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def operator_kubeconfig(self) -> Path:
        return self.workdir / "operator.kubeconfig"

    @classmethod
    def start(
        cls,
        workdir: Path,
        timeout: float = 90.0,
        controllers: bool = False,
        scheduler_args: tuple[str, ...] = (),
    ) -> LocalCluster:
        """etcd and kube-apiserver; with `controllers`, also kube-controller-manager and the
        default kube-scheduler (with `scheduler_args`), as a real control plane runs them."""
        workdir.mkdir(parents=True, exist_ok=True)
        # every binary first: a missing one must not leave an etcd behind
        apiserver = str(apiserver_binary())
        binaries = [kube_binary(n) for n in CONTROL_PLANE] if controllers else []
        if shutil.which("etcd") is None:
            raise ClusterError("etcd is not installed (scripts/build-kube.sh installs it)")
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        admin, operator = os.urandom(16).hex(), os.urandom(16).hex()
        (workdir / "tokens.csv").write_text(
            f'{admin},admin,admin,"system:masters"\n{operator},{OPERATOR_USER},{OPERATOR_USER}\n'
        )
        _service_account_key(workdir / "sa.key")
        logs = workdir / "logs"
        logs.mkdir(exist_ok=True)
        etcd = _spawn(
            [
                "etcd",
                "--data-dir",
                str(workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
                "--quota-backend-bytes",
                str(4 << 30),
            ],
            logs / "etcd.log",
        )
        api = _spawn(
            [
                apiserver,
                "--etcd-servers",
                f"http://127.0.0.1:{etcd_port}",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(api_port),
                "--advertise-address",
                "127.0.0.1",
                "--cert-dir",
                str(workdir / "certs"),
                "--token-auth-file",
                str(workdir / "tokens.csv"),
                "--authorization-mode",
                "RBAC",
                "--service-account-issuer",
                "https://rackwise.local",
                "--service-account-key-file",
                str(workdir / "sa.key"),
                "--service-account-signing-key-file",
                str(workdir / "sa.key"),
                "--service-cluster-ip-range",
                "10.96.0.0/16",
                "--disable-admission-plugins",
                "ServiceAccount",
                "--max-requests-inflight",
                "2000",
                "--max-mutating-requests-inflight",
                "1000",
                "--logtostderr",
                "--v",
                "0",
            ],
            logs / "apiserver.log",
        )
        cluster = cls(workdir, api_port, admin, operator, [api, etcd])
        cluster._write_kubeconfigs()
        (workdir / "cluster.json").write_text(
            json.dumps(
                {
                    "port": api_port,
                    "pids": cluster.pids,
                    "admin_token": admin,
                    "operator_token": operator,
                }
            )
        )
        try:
            cluster.wait_ready(timeout)
        except ClusterError:
            cluster.stop()
            raise
        if controllers:
            cluster._start_controllers(binaries[0], binaries[1], scheduler_args)
        return cluster

    def _start_controllers(
        self, manager_binary: Path, scheduler_binary: Path, scheduler_args: tuple[str, ...]
    ) -> None:
        logs, config = self.workdir / "logs", str(self.admin_kubeconfig)
        common = ["--kubeconfig", config, "--leader-elect=false", "--port=0", "--logtostderr"]
        manager = [
            str(manager_binary),
            *common,
            "--secure-port=0",
            "--controllers",
            CONTROLLERS,
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
        ]
        scheduler = [str(scheduler_binary), *common, "--secure-port=0", *scheduler_args]
        self.pids.append(_spawn(manager, logs / "kube-controller-manager.log"))
        self.pids.append(_spawn(scheduler, logs / "kube-scheduler.log"))
        state = json.loads((self.workdir / "cluster.json").read_text())
        (self.workdir / "cluster.json").write_text(json.dumps({**state, "pids": self.pids}))

    @classmethod
    def attach(cls, workdir: Path) -> LocalCluster:
        data = json.loads((workdir / "cluster.json").read_text())
        return cls(workdir, data["port"], data["admin_token"], data["operator_token"], data["pids"])

    def _write_kubeconfigs(self) -> None:
        for path, user, token in (
            (self.admin_kubeconfig, "admin", self.admin_token),
            (self.operator_kubeconfig, OPERATOR_USER, self.operator_token),
        ):
            path.write_text(
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "current-context": "local",
                        "clusters": [
                            {
                                "name": "local",
                                "cluster": {
                                    "server": self.server,
                                    "insecure-skip-tls-verify": True,
                                },
                            }
                        ],
                        "users": [{"name": user, "user": {"token": token}}],
                        "contexts": [
                            {"name": "local", "context": {"cluster": "local", "user": user}}
                        ],
                    }
                )
            )

    def wait_ready(self, timeout: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(request, context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        log = (self.workdir / "logs" / "apiserver.log").read_text()[-2000:]
        raise ClusterError(f"kube-apiserver not ready after {timeout:.0f} s: {log}")

    def kubectl(
        self, *args: str, user: str = "admin", check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        config = self.admin_kubeconfig if user == "admin" else self.operator_kubeconfig
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(config), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def stop(self) -> None:
        for pid in [*self.pids[2:], *self.pids[:2]]:  # controllers, API server, etcd
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for pid in self.pids:
            _wait_gone(pid)
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)


def _spawn(command: list[str], log: Path) -> int:
    with log.open("ab") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process.pid


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            finished = pid if not _alive(pid) else 0
        if finished:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _service_account_key(path: Path) -> None:
    """A throw-away RSA key: the API server insists on one for service-account tokens."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as exc:
        raise ClusterError("the local cluster needs `pip install 'rackwise[cluster]'`") from exc

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )

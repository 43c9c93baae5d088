"""A real kube-apiserver + etcd on loopback for the whole session, with the real
kube-controller-manager (Job, StatefulSet, Deployment controllers, garbage collector) and the
default kube-scheduler, all 1.20 from Debian's source; the operator runs in this process as the
`rackwise-operator` token user, whose only rights are the ClusterRole in manifests/base/rbac.
Each test starts from an empty cluster with the nodes it asks for."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.controller.config import OperatorConfig
from scheduler.controller.operator import run
from scheduler.controller.runtime.gateway import AdminGateway
from scheduler.devtools.cluster import LocalCluster, free_port
from scheduler.devtools.devcluster import install
from scheduler.devtools.fake import create_nodes, run_kubelet
from scheduler.model import SchedulingPolicy, TopologySpec
from scheduler.topology import generate
from tests.waits import until

pytestmark = pytest.mark.apiserver
Obj = dict[str, Any]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster.start(tmp_path_factory.mktemp("apiserver"), controllers=True)
    try:
        install(local)
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="session")
def admin(cluster: LocalCluster) -> AdminGateway:
    return AdminGateway(cluster.admin_kubeconfig)


# the session operator's probes and metrics (loopback)
OPERATOR_PORT = free_port()
# a NotReady blip shorter than this keeps a gang where it is
GRACE_S = 5.0


@contextlib.contextmanager
def operating(
    cluster: LocalCluster, admin: AdminGateway, config: OperatorConfig, port: int
) -> Iterator[threading.Event]:
    """The operator (in this process, as the token user) and the fake kubelet, until the block
    ends; the event stops them."""
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=run, args=(config, cluster.operator_kubeconfig, port, stop), daemon=True
        ),
        threading.Thread(target=run_kubelet, args=(admin, stop, 0.3), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        yield stop
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=40)


@pytest.fixture(scope="session")
def operator(cluster: LocalCluster, admin: AdminGateway) -> Iterator[threading.Event]:
    # moves at checkpoints on: only jobs that report a checkpoint (test_defrag.py) are moved
    config = OperatorConfig(
        resync_s=1.0,
        node_grace_s=GRACE_S,
        scheduling=SchedulingPolicy(defrag_moves_per_hour=60),
    )
    with operating(cluster, admin, config, OPERATOR_PORT) as stop:
        yield stop


class Env:
    """What a test uses: kubectl, the admin API, waiting for conditions."""

    def __init__(self, cluster: LocalCluster, admin: AdminGateway) -> None:
        self.cluster = cluster
        self.admin = admin

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> Any:
        return self.cluster.kubectl(*args, stdin=stdin, check=check)

    def apply(self, manifest: Obj | str | Path, check: bool = True) -> Any:
        if isinstance(manifest, Path):
            return self.kubectl("apply", "-f", str(manifest), check=check)
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self.kubectl("apply", "-f", "-", stdin=text, check=check)

    def job(self, name: str, namespace: str = "default") -> Obj:
        return dict(
            json.loads(self.kubectl("get", "tj", name, "-n", namespace, "-o", "json").stdout)
        )

    def pods(self, name: str, namespace: str = "default") -> list[Obj]:
        return [
            p
            for p in self.admin.pods()
            if p["metadata"]["namespace"] == namespace
            and (p["metadata"].get("labels") or {}).get("rackwise.io/job") == name
        ]

    def finish(self, pod: Obj, phase: str) -> None:
        """Set a pod's phase as its kubelet would, once the test cluster's stand-in kubelet has
        started it: its Running patch, read before ours, must not land after ours."""
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])

        def running() -> bool:
            now = [
                p
                for p in self.admin.pods()
                if (p["metadata"]["namespace"], p["metadata"]["name"]) == key
            ]
            return bool(now) and now[0]["status"].get("phase") == "Running"

        self.wait(f"{meta['name']} running", running)
        self.admin.patch_pod_status(meta["namespace"], meta["name"], {"phase": phase})

    def bound(self, name: str, namespace: str = "default") -> list[Obj]:
        """The job's pods that are bound: a waiting TrainingJob's pods exist, unbound."""
        return [p for p in self.pods(name, namespace) if p["spec"].get("nodeName")]

    def wait(self, what: str, check: Callable[[], bool], timeout: float = 45.0) -> None:
        """Until `check()`; `timeout` is the allowance on an idle machine (tests/waits.py)."""
        until(what, check, timeout)

    def post(self, job: Obj, namespace: str = "default") -> None:
        """Create a TrainingJob straight through the API, as `kubectl apply --validate=false`
        or any client does: only the CRD's schema stands between it and the operator."""
        self.admin.custom.create_namespaced_custom_object(
            "rackwise.io", "v1alpha1", namespace, "trainingjobs", job
        )

    def events(self, name: str) -> list[Obj]:
        out = self.kubectl("get", "events", "-A", "-o", "json").stdout
        return [e for e in json.loads(out)["items"] if e["involvedObject"]["name"] == name]

    def healthz(self) -> int:
        url = f"http://127.0.0.1:{OPERATOR_PORT}/healthz"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def condition(self, name: str, kind: str = "Placed") -> Obj:
        return next((c for c in self._conditions(name) if c["type"] == kind), {})

    def _conditions(self, name: str) -> list[Obj]:
        return list((self.job(name).get("status") or {}).get("conditions") or [])

    def wait_placed(self, name: str) -> Obj:
        try:
            self.wait(f"{name} placed", lambda: self.condition(name).get("status") == "True")
        except AssertionError as exc:  # say what the job said instead
            said = [(c["type"], c.get("reason"), c.get("message")) for c in self._conditions(name)]
            raise AssertionError(f"{exc}; its conditions: {said}; {self.dump()}") from None
        job = self.job(name)
        total = job["spec"]["replicas"] + sum(r["replicas"] for r in job["spec"].get("roles", []))
        self.wait(f"{name} pods bound", lambda: self._bound(name, total))
        return job

    def dump(self) -> str:
        """What the cluster holds, for a failure's message: each pod (namespace, name, owner,
        labels, node, whether it is being deleted) and the workload objects."""
        pods = [
            (
                p["metadata"]["namespace"],
                p["metadata"]["name"],
                [o["kind"] + "/" + o["name"] for o in p["metadata"].get("ownerReferences") or []],
                p["metadata"].get("labels"),
                p["spec"].get("nodeName"),
                p["metadata"].get("deletionTimestamp"),
            )
            for p in self.admin.pods()
        ]
        kinds = "tj,jobs.batch,podgroups,queues.rackwise.io,replicasets,statefulsets"
        objects = self.kubectl("get", kinds, "-A", "-o", "name", check=False).stdout
        url = f"http://127.0.0.1:{OPERATOR_PORT}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        queues = [line for line in text.splitlines() if line.startswith("rackwise_queue")]
        return f"pods: {pods}; objects: {objects.split()}; operator: {queues}"

    def _bound(self, name: str, replicas: int) -> bool:
        pods = self.pods(name)
        return len(pods) == replicas and all(p["spec"].get("nodeName") for p in pods)

    def node_pool(self) -> dict[str, str]:
        return {
            n["metadata"]["name"]: n["metadata"]["labels"]["rackwise.io/pool"]
            for n in self.admin.nodes()
        }

    def node_rack(self) -> dict[str, str]:
        return {
            n["metadata"]["name"]: n["metadata"]["labels"]["rackwise.io/rack"]
            for n in self.admin.nodes()
        }


def reset(env: Env, spec: TopologySpec) -> None:
    env.kubectl("delete", "tj", "--all", "--all-namespaces", "--wait=false")
    kinds = "jobs.batch,statefulsets,deployments,podgroups,queues.rackwise.io"
    env.kubectl("delete", kinds, "--all", "--all-namespaces", "--wait=false", check=False)
    env.kubectl(
        "delete",
        "pods",
        "--all",
        "--all-namespaces",
        "--grace-period=0",
        "--force",
        "--wait=false",
        check=False,
    )
    env.wait("pods gone", lambda: not env.admin.pods())
    for node in env.admin.nodes():
        env.admin.delete_node(node["metadata"]["name"])
    create_nodes(env.admin, spec, OperatorConfig())


@pytest.fixture
def env(cluster: LocalCluster, admin: AdminGateway, operator: threading.Event) -> Env:
    return Env(cluster, admin)


@pytest.fixture
def fabric(env: Env) -> Callable[..., TopologySpec]:
    def make(**kwargs: Any) -> TopologySpec:
        spec = generate(**kwargs)
        reset(env, spec)
        return spec

    return make


def training_job(name: str, replicas: int, gpus: int = 8, **spec: Any) -> Obj:
    return {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "gpusPerReplica": gpus,
            "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
            **spec,
        },
    }


@contextlib.contextmanager
def own_cluster(
    workdir: Path, namespaces: tuple[str, ...], spec: TopologySpec, config: OperatorConfig
) -> Iterator[Env]:
    """A control plane of a module's own (no controllers): the namespaces served besides
    `default`, the CRDs (Queues established), the nodes of `spec`, the operator and the fake
    kubelet; all stopped when the block ends."""
    local = LocalCluster.start(workdir)
    try:
        for namespace in namespaces:
            local.kubectl("create", "namespace", namespace)
        install(local, namespaces=("default", *namespaces))
        local.kubectl(
            "wait", "--for=condition=Established", "crd/queues.rackwise.io", "--timeout=60s"
        )
        admin = AdminGateway(local.admin_kubeconfig)
        create_nodes(admin, spec, config)
        with operating(local, admin, config, free_port()):
            yield Env(local, admin)
    finally:
        local.stop()

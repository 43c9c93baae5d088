"""Operator benchmark, end to end on the real API server, four ways in one run.

1,000 fake 8-GPU nodes (5 spines x 25 racks x 8 hosts), 200 gangs of 1-64 pods (1 GPU per pod,
seeded, 6,542 pods that all fit) submitted at once, on the same control plane (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler 1.20 from Debian's source), cleaned
between phases:
  null            this process creates the pods rackwise makes for these gangs (the same
                  bodies: env, labels, owner references) and binds each to a precomputed node,
                  16 threads, no decision at all: what the API server allows on this machine;
  TrainingJob     rackwise (its own process, exactly its RBAC) creates and binds every gang;
  batch/v1 Job    the real Job controller creates the pods (schedulerName rackwise, a
                  PodGroup each), rackwise binds them;
  kube-scheduler  this process creates those same pods for the default scheduler, started
                  with --kube-api-qps=2000 --kube-api-burst=4000 so its client limiter does not
                  bind.
Per phase: seconds from the first create to the last pod bound (a watch counts bindings), pods
bound per second, and for rackwise its API requests per placed pod (rackwise_api_requests_total
from its /metrics) and peak RSS (sampled every 50 ms). Then the operator idles for a minute:
its requests per idle minute, by verb. With --large (instead): 12,500 nodes and 100,000 bound
pods, then the operator's peak RSS over its first minute (how many nodes were made is reported).
Wall-clock figures on a shared 2-core machine: a measurement, not a test.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import psutil
from kubernetes import client, watch

from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import GROUP, PLURAL, VERSION, AdminGateway, Gateway
from scheduler.controller.runtime.objects import TrainingJob
from scheduler.controller.trainingjob.pods import pod
from scheduler.controller.trainingjob.translate import translate
from scheduler.devtools.cluster import REPO, LocalCluster, free_port
from scheduler.devtools.devcluster import install, operator_command
from scheduler.devtools.fake import create_nodes
from scheduler.topology import generate

Obj = dict[str, Any]
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
TOLERATE_POOLS = {"key": "rackwise.io/pool", "operator": "Exists", "effect": "NoSchedule"}
FAST_SCHEDULER = ("--kube-api-qps=2000", "--kube-api-burst=4000")


def container() -> Obj:
    return {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def training_job(i: int, pods: int) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingJob",
        "metadata": {"name": f"bench-{i}", "namespace": "default"},
        "spec": {
            "replicas": pods,
            "gpusPerReplica": 1,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def batch_job(i: int, pods: int) -> Obj:
    name = f"bench-{i}"
    spec = {"schedulerName": "rackwise", "restartPolicy": "Never", "containers": [container()]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {"metadata": {"labels": {GROUP_LABEL: name}}, "spec": spec},
        },
    }


def podgroup(i: int, pods: int) -> Obj:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": f"bench-{i}", "namespace": "default"},
        "spec": {"minMember": pods},
    }


def plain_pod(name: str, node: str | None = None, scheduler: str | None = None) -> Obj:
    spec: Obj = {"tolerations": [TOLERATE_POOLS], "containers": [container()]}
    if node:
        spec["nodeName"] = node
    if scheduler:  # a scheduler that does not exist: nobody else binds the pod
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


class Bindings:
    """Counts pods bound in `default` from a watch; the time the count reached `target`."""

    def __init__(self, admin: Gateway, target: int) -> None:
        self.target, self.bound, self.done_at = target, set[str](), 0.0
        self.stop = threading.Event()
        self.ready = threading.Event()
        threading.Thread(target=self._run, args=(admin,), daemon=True).start()
        self.ready.wait(30)

    def _run(self, admin: Gateway) -> None:
        stream = watch.Watch().stream(
            admin.core.list_namespaced_pod, "default", timeout_seconds=900
        )
        self.ready.set()
        for event in stream:
            pod = event["object"]
            if pod.spec.node_name and pod.metadata.name not in self.bound:
                self.bound.add(pod.metadata.name)
                if len(self.bound) >= self.target and not self.done_at:
                    self.done_at = time.perf_counter()
                    return
            if self.stop.is_set():
                return

    def wait(self, timeout: float) -> float:
        deadline = time.perf_counter() + timeout
        while not self.done_at and time.perf_counter() < deadline:
            time.sleep(0.1)
        return self.done_at


def clean(admin: Gateway) -> None:
    """Every gang object and pod of `default` gone (collection deletes: one request each)."""
    custom = admin.custom
    for group, version, plural in (
        (GROUP, VERSION, PLURAL),
        ("scheduling.x-k8s.io", "v1alpha1", "podgroups"),
    ):
        custom.delete_collection_namespaced_custom_object(group, version, "default", plural)
    client.BatchV1Api(admin.api).delete_collection_namespaced_job(
        "default", propagation_policy="Background"
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        delete_pods(admin)
        for _ in range(30):
            if not admin.pods():
                return
            time.sleep(1)


def delete_pods(admin: Gateway) -> None:
    """One collection delete; thousands of pods can outlast the request's deadline (500 or 504),
    while the server goes on deleting: the caller looks again."""
    try:
        admin.core.delete_collection_namespaced_pod("default", grace_period_seconds=0)
    except client.ApiException as exc:
        if exc.status not in (500, 504):
            raise


def scrape(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def timed(
    admin: Gateway, total: int, submit: Callable[[], None], timeout: float = 900
) -> tuple[float, int]:
    counter = Bindings(admin, total)
    start = time.perf_counter()
    submit()
    done = counter.wait(timeout)
    counter.stop.set()
    return (done or time.perf_counter()) - start, len(counter.bound)


def pool_map(fn: Callable[[Any], object], items: list[Any]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(fn, items))


class Operator:
    """rackwise as its own process, its RSS sampled every 50 ms."""

    def __init__(self, cluster: LocalCluster, workdir: Path) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            operator_command(cluster.operator_kubeconfig, self.port),
            cwd=REPO,
            stdout=(workdir / "operator.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.peak = 0
        self.stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()
        time.sleep(4)

    def _sample(self) -> None:
        process = psutil.Process(self.process.pid)
        while not self.stop.is_set():
            self.peak = max(self.peak, process.memory_info().rss)
            self.stop.wait(0.05)

    def requests(self) -> float:
        return scrape(self.port, "rackwise_api_requests_total")

    def by_verb(self) -> dict[str, float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        found = re.findall(r'^rackwise_api_requests_total\{verb="(\w+)"\} (\S+)$', text, re.M)
        return {verb: float(value) for verb, value in found}

    def close(self) -> None:
        self.stop.set()
        self.process.terminate()
        self.process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--large", action="store_true", help="only 12,500 nodes / 100k pods")
    args = parser.parse_args()
    if args.large:
        large()
        return
    rng = random.Random(7)
    sizes = [rng.randint(1, 64) for _ in range(200)]
    total = sum(sizes)
    workdir = Path(tempfile.mkdtemp(prefix="rackwise-bench-"))
    cluster = LocalCluster.start(workdir, controllers=True, scheduler_args=FAST_SCHEDULER)
    rows: list[list[str]] = []
    try:
        install(cluster)
        admin = AdminGateway(cluster.admin_kubeconfig, pool_size=32)
        spec = generate(blocks=5, racks=25, hosts=8, gpus=8)
        create_nodes(admin, spec, OperatorConfig())
        nodes = [h.name for h in spec.hosts for _ in range(8)][:total]
        rows.append(show(phase_null(admin, the_same_pods(admin, sizes), nodes)))
        clean(admin)
        operator = Operator(cluster, workdir)
        rows.append(show(phase_training(admin, operator, sizes)))
        clean(admin)
        rows.append(show(phase_batch(admin, operator, sizes)))
        time.sleep(15)  # the last phase's events and status writes land before the idle minute
        before = operator.by_verb()
        time.sleep(60)
        after = operator.by_verb()
        idle = {verb: after[verb] - before.get(verb, 0.0) for verb in after}
        peak = operator.peak
        operator.close()
        clean(admin)
        rows.append(show(phase_kube_scheduler(admin, the_same_pods(admin, sizes))))
    finally:
        cluster.stop()
    report(rows, total, idle, peak)


def show(row: list[str]) -> list[str]:
    print(" | ".join(row), flush=True)
    return row


def the_same_pods(admin: Gateway, sizes: list[int]) -> list[Obj]:
    """The pods rackwise makes for the 200 TrainingJobs (env, labels, owner references, pool
    selector and toleration), in rank order: what the null scheduler (which binds pod i to the
    i-th precomputed node) and kube-scheduler get, so that every path handles the same objects.
    The jobs exist (created here with no operator running), so the garbage collector keeps
    their pods."""
    pool_map(
        lambda i: admin.custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, training_job(i, sizes[i])
        ),
        list(range(len(sizes))),
    )
    config = OperatorConfig()
    jobs = sorted(admin.jobs(), key=lambda j: int(j["metadata"]["name"].split("-")[1]))
    return [
        pod(view, rank, config)
        for view in (translate(TrainingJob.of(j), config) for j in jobs)
        for rank in range(view.gang.pods)
    ]


def phase_null(admin: Gateway, bodies: list[Obj], nodes: list[str]) -> list[str]:
    def one(item: tuple[Obj, str]) -> None:
        body, node = item
        admin.create_pod("default", body | {"spec": body["spec"] | {"schedulerName": "null"}})
        admin.bind("default", body["metadata"]["name"], node)

    pairs = list(zip(bodies, nodes, strict=False))
    seconds, bound = timed(admin, len(bodies), lambda: pool_map(one, pairs))
    return ["null scheduler (create + bind)", f"{seconds:.1f}", str(bound), "", ""]


def phase_training(admin: Gateway, operator: Operator, sizes: list[int]) -> list[str]:
    before = operator.requests()

    def submit() -> None:
        pool_map(
            lambda i: admin.custom.create_namespaced_custom_object(
                GROUP, VERSION, "default", PLURAL, training_job(i, sizes[i])
            ),
            list(range(len(sizes))),
        )

    seconds, bound = timed(admin, sum(sizes), submit)
    per_pod = (operator.requests() - before) / max(bound, 1)
    return ["rackwise, TrainingJob", f"{seconds:.1f}", str(bound), f"{per_pod:.2f}", ""]


def phase_batch(admin: Gateway, operator: Operator, sizes: list[int]) -> list[str]:
    before = operator.requests()
    batch = client.BatchV1Api(admin.api)

    def one(i: int) -> None:
        admin.custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", podgroup(i, sizes[i])
        )
        # the client takes the JSON form as it is (its annotations name only the model class)
        batch.create_namespaced_job("default", cast(Any, batch_job(i, sizes[i])))

    seconds, bound = timed(admin, sum(sizes), lambda: pool_map(one, list(range(len(sizes)))))
    per_pod = (operator.requests() - before) / max(bound, 1)
    return ["rackwise, batch/v1 Job + PodGroup", f"{seconds:.1f}", str(bound), f"{per_pod:.2f}", ""]


def phase_kube_scheduler(admin: Gateway, bodies: list[Obj]) -> list[str]:
    def one(body: Obj) -> None:
        spec = body["spec"] | {"schedulerName": "default-scheduler"}
        admin.create_pod("default", body | {"spec": spec})

    seconds, bound = timed(admin, len(bodies), lambda: pool_map(one, bodies))
    return ["kube-scheduler 1.20 (qps 2000)", f"{seconds:.1f}", str(bound), "", ""]


def report(rows: list[list[str]], total: int, idle: dict[str, float], peak: int) -> None:
    from benchmarks.common import table

    for row in rows:
        seconds, bound = float(row[1]), int(row[2])
        row[4] = f"{bound / seconds:.0f}"
    rates = {row[0]: float(row[4]) for row in rows}
    null = rates["null scheduler (create + bind)"]
    kube = rates["kube-scheduler 1.20 (qps 2000)"]
    print(f"\n== 1,000 nodes x 8 GPUs, 200 gangs of 1-64 pods ({total} pods), submitted at once")
    print(table(["path", "s to all bound", "pods bound", "API req/pod", "pods/s"], rows))
    for name in ("rackwise, TrainingJob", "rackwise, batch/v1 Job + PodGroup"):
        print(
            f"{name}: {rates[name] / null:.2f}x the null scheduler (target >= 0.8), "
            f"{rates[name] / kube:.2f}x kube-scheduler (target >= 2)"
        )
    verbs = ", ".join(f"{v} {n:.0f}" for v, n in sorted(idle.items()) if n)
    print(f"rackwise API requests per idle minute: {sum(idle.values()):.0f} ({verbs})")
    print("  (the Lease is read and renewed every retryPeriodSeconds, 2 s, by design)")
    print(f"rackwise peak RSS over both phases: {peak / (1 << 20):.0f} MB (target <= 300)")


def large() -> None:
    """12,500 nodes, 100,000 pods bound by the null path, then the operator: its RSS."""
    workdir = Path(tempfile.mkdtemp(prefix="rackwise-bench-large-"))
    cluster = LocalCluster.start(workdir)
    try:
        install(cluster)
        admin = AdminGateway(cluster.admin_kubeconfig, pool_size=32)
        spec = generate(blocks=25, racks=50, hosts=10, gpus=8)
        started = time.perf_counter()
        create_nodes(admin, spec, OperatorConfig())
        made = len(admin.nodes())
        names = [h.name for h in spec.hosts for _ in range(8)]
        pool_map(
            lambda i: admin.create_pod("default", plain_pod(f"p-{i}", names[i])),
            list(range(100_000)),
        )
        filled = time.perf_counter() - started
        operator = Operator(cluster, workdir)
        time.sleep(60)
        operator.close()
        print(f"\n== large: {made:,} nodes, 100,000 pods bound (filled in {filled:.0f} s)")
        print(f"operator peak RSS over its first minute: {operator.peak / (1 << 20):.0f} MB")
        print("(target <= 1 GB)")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()

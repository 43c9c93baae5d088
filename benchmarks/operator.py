"""Operator benchmark (issue 4), end to end on the real API server.

1,000 fake 8-GPU nodes (5 spines x 25 racks x 8 hosts), 200 TrainingJobs of 1-64 pods (1 GPU
per pod, seeded mix, ~6,500 pods that all fit) created at once. The operator runs as its own
process with exactly its RBAC rights. Reports time from the first create to every pod bound,
pods bound per second, the share of that time spent solving (rackwise_solve_seconds_sum from
the operator's /metrics) and the operator's peak RSS (sampled every 50 ms).
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from scheduler.controller.cluster import REPO, LocalCluster, free_port
from scheduler.controller.config import OperatorConfig
from scheduler.controller.devcluster import install, operator_command
from scheduler.controller.fake import create_nodes
from scheduler.controller.gateway import GROUP, PLURAL, VERSION, Gateway
from scheduler.topology import generate

API_WORKERS = int(os.environ.get("RACKWISE_API_WORKERS", "16"))


def job(i: int, pods: int) -> dict[str, object]:
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


def _placed(job: dict[str, object]) -> bool:
    status = job.get("status") or {}
    conditions = status.get("conditions") or [] if isinstance(status, dict) else []
    return any(c.get("type") == "Placed" and c.get("status") == "True" for c in conditions)


def solve_seconds(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("rackwise_solve_seconds_sum"):
                return float(line.split()[-1])
    return 0.0


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="rackwise-bench-"))
    cluster = LocalCluster.start(workdir)
    try:
        install(cluster)
        admin = Gateway(cluster.admin_kubeconfig, pool_size=32)
        create_nodes(admin, generate(blocks=5, racks=25, hosts=8, gpus=8), OperatorConfig())
        port = free_port()
        (workdir / "config.yaml").write_text(f"apiWorkers: {API_WORKERS}\n")
        operator = subprocess.Popen(
            operator_command(cluster.operator_kubeconfig, port, workdir / "config.yaml"),
            cwd=REPO,
            stdout=(workdir / "operator.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        peak = [0]
        stop = threading.Event()

        def sample() -> None:
            process = psutil.Process(operator.pid)
            while not stop.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                stop.wait(0.05)

        threading.Thread(target=sample, daemon=True).start()
        time.sleep(3)  # operator up and idle
        rng = random.Random(7)
        sizes = [rng.randint(1, 64) for _ in range(200)]
        total = sum(sizes)
        start = time.perf_counter()
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda i: admin.custom.create_namespaced_custom_object(
                        GROUP, VERSION, "default", PLURAL, job(i, sizes[i])
                    ),
                    range(len(sizes)),
                )
            )
        created = time.perf_counter() - start
        # poll the 200 jobs' status (cheap), not the 6,500 pods: the poller must not be the load
        while time.perf_counter() - start < 600:
            if all(_placed(j) for j in admin.jobs()):
                break
            time.sleep(0.25)
        elapsed = time.perf_counter() - start
        bound = sum(1 for p in admin.pods() if p["spec"].get("nodeName"))
        solve = solve_seconds(port)
        stop.set()
        operator.terminate()
        operator.wait(timeout=30)
        print(f"\n== operator: 1000 nodes x 8 GPUs, 200 TrainingJobs of 1-64 pods ({total} pods)")
        print(
            f"created all TrainingJobs in {created:.1f} s; all {bound}/{total} pods bound after "
            f"{elapsed:.1f} s"
        )
        print(f"pods bound per second: {bound / elapsed:.0f} (target >= 500)")
        print(f"solve time: {solve:.2f} s = {solve / elapsed:.1%} of the time to all placed")
        print(f"operator peak RSS: {peak[0] / (1 << 20):.0f} MB (target <= 500 MB)")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()

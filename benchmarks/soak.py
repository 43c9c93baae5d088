"""`make soak`: continuous submissions, deletions, node flaps and leader kills against two operator
replicas on the real API server, with the cluster's invariants checked all along.

Not a test (it takes 30 minutes by default and measures rather than passes): it prints what it
saw. Run `python -m benchmarks.soak --minutes 3` for a short look."""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from scheduler.controller.cluster import invariants
from scheduler.controller.config import OperatorConfig
from scheduler.controller.runtime.gateway import AdminGateway, ApiError
from scheduler.devtools.cluster import LocalCluster
from scheduler.devtools.devcluster import Replicas, install
from scheduler.devtools.fake import create_nodes, run_kubelet, set_ready
from scheduler.topology import generate

Obj = dict[str, Any]
CONFIG = {
    "resyncSeconds": 2.0,
    "nodeNotReadyGraceSeconds": 40,
    "leaderElection": {
        "leaseDurationSeconds": 6,
        "renewDeadlineSeconds": 4,
        "retryPeriodSeconds": 1,
    },
}


@dataclass
class Tally:
    submitted: int = 0
    invalid_sent: int = 0
    deleted: int = 0
    flaps: int = 0
    cordons: int = 0
    kills: int = 0
    submitted_at: dict[str, float] = field(default_factory=dict)
    placed_after: dict[str, float] = field(default_factory=dict)
    oversubscribed: list[str] = field(default_factory=list)
    leaders: list[str] = field(default_factory=list)
    rss: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # replica -> samples


def job(name: str, rng: random.Random, invalid: bool) -> Obj:
    pods = rng.choice([1, 1, 2, 2, 4, 8])
    body: Obj = {
        "apiVersion": "rackwise.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": pods,
            "gpusPerReplica": rng.choice([1, 2, 4, 8]),
            "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
        },
    }
    if invalid:
        body["spec"]["template"]["spec"]["containers"][0]["resources"] = "lots"
    return body


class Soak:
    def __init__(self, workdir: Path, minutes: float, seed: int, kill_minutes: float) -> None:
        self.workdir = workdir
        self.seconds = minutes * 60
        self.kill_s = kill_minutes * 60
        self.rng = random.Random(seed)
        self.tally = Tally()
        self.stop = threading.Event()
        self.cluster = LocalCluster.start(workdir)
        install(self.cluster)
        self.admin = AdminGateway(self.cluster.admin_kubeconfig)
        self.spec = generate(blocks=2, racks=4, hosts=8, gpus=8)  # 64 nodes, 512 GPUs
        create_nodes(self.admin, self.spec, OperatorConfig())
        config = workdir / "config.yaml"
        config.write_text(yaml.safe_dump(CONFIG))
        (workdir / "logs").mkdir(exist_ok=True)
        self.replicas = Replicas(self.cluster, config, workdir / "logs")

    def run(self) -> Tally:
        for target in (self._kubelet, self._watch, self._finish_jobs, self._poll_placed):
            threading.Thread(target=target, daemon=True).start()
        self.replicas.start()
        self.replicas.start()
        start = time.monotonic()
        next_flap = start + 60
        next_kill = start + self.kill_s if self.kill_s else float("inf")
        n = 0
        while time.monotonic() - start < self.seconds:
            now = time.monotonic()
            self._submit(n)
            n += 1
            if self.rng.random() < 0.45:
                self._delete_one()
            if now >= next_flap:
                self._flap()
                next_flap = now + self.rng.uniform(45, 120)
            if now >= next_kill:
                self._kill_leader()
                next_kill = now + self.rng.uniform(0.85, 1.15) * self.kill_s
            time.sleep(self.rng.uniform(0.5, 1.5))
        self.stop.set()
        return self.tally

    def settle(self, timeout: float = 120) -> tuple[invariants.Report, int]:
        """Stop the chaos (every node Ready and uncordoned), give the operator time, then check.
        A gang still re-placing a lost pod is counted apart: it waits for room by design."""
        for host in self.spec.hosts:
            set_ready(self.admin, host.name, True)
            self.cluster.kubectl("uncordon", host.name, check=False)
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.admin.jobs()
            steady = [j for j in jobs if (j.get("status") or {}).get("phase") != "Repairing"]
            report = invariants.check(
                self.admin.nodes(), self.admin.pods(), steady, OperatorConfig()
            )
            if not report.half_bound or time.monotonic() > deadline:
                return report, len(jobs) - len(steady)
            time.sleep(2)

    def _submit(self, n: int) -> None:
        invalid = self.rng.random() < 0.05
        name = f"soak-{n}"
        try:
            self.admin.custom.create_namespaced_custom_object(
                "rackwise.io", "v1alpha1", "default", "trainingjobs", job(name, self.rng, invalid)
            )
        except Exception as exc:
            print(f"submit {name} failed: {exc}")
            return
        self.tally.submitted += 1
        self.tally.invalid_sent += invalid
        if not invalid:
            self.tally.submitted_at[name] = time.monotonic()

    def _delete_one(self) -> None:
        names = [j["metadata"]["name"] for j in self.admin.jobs()]
        if len(names) > 40:
            victim = self.rng.choice(names)
            self.cluster.kubectl("delete", "tj", victim, "--wait=false", check=False)
            self.tally.deleted += 1

    def _flap(self) -> None:
        node = self.rng.choice(self.spec.hosts).name
        if self.rng.random() < 0.3:
            self.cluster.kubectl("cordon", node, check=False)
            back = threading.Timer(
                self.rng.uniform(10, 60), self.cluster.kubectl, ("uncordon", node)
            )
            back.start()
            self.tally.cordons += 1
            return
        down = self.rng.uniform(1, 90)  # some shorter than the 40 s grace, some longer
        set_ready(self.admin, node, False)
        threading.Timer(down, set_ready, (self.admin, node, True)).start()
        self.tally.flaps += 1

    def _kill_leader(self) -> None:
        leader = self.replicas.leader()
        if leader is not None:
            self.replicas.kill(leader)
            self.tally.kills += 1
            self.replicas.start()

    def _kubelet(self) -> None:
        run_kubelet(self.admin, self.stop, 1.0)

    def _finish_jobs(self) -> None:
        """Running pods finish after a while, as training runs do (they then hold nothing)."""
        started: dict[str, float] = {}
        rng = random.Random(self.rng.random())  # this thread's own stream
        while not self.stop.wait(5):
            try:
                for pod in self.admin.pods():
                    name = pod["metadata"]["name"]
                    if pod.get("status", {}).get("phase") != "Running":
                        continue
                    since = started.setdefault(name, time.monotonic())
                    if time.monotonic() - since > rng.uniform(120, 900):
                        self.admin.patch_pod_status("default", name, {"phase": "Succeeded"})
            except ApiError:
                continue

    def _watch(self) -> None:
        config = OperatorConfig()
        while not self.stop.wait(2):
            try:
                nodes, pods = self.admin.nodes(), self.admin.pods()
                self.tally.oversubscribed += invariants.oversubscribed(nodes, pods, config)
                self._leader_and_memory()
            except ApiError:
                continue

    def _poll_placed(self) -> None:
        """Submission to Placed, seen from outside at 0.5 s resolution."""
        while not self.stop.wait(0.5):
            try:
                self._placements(self.admin.jobs())
            except ApiError:
                continue

    def _placements(self, jobs: list[Obj]) -> None:
        now = time.monotonic()
        for j in jobs:
            name = j["metadata"]["name"]
            placed = any(
                c["type"] == "Placed" and c["status"] == "True"
                for c in (j.get("status") or {}).get("conditions") or []
            )
            if placed and name in self.tally.submitted_at and name not in self.tally.placed_after:
                self.tally.placed_after[name] = now - self.tally.submitted_at[name]

    def _leader_and_memory(self) -> None:
        leader = self.replicas.leader()
        if leader and (not self.tally.leaders or self.tally.leaders[-1] != leader):
            self.tally.leaders.append(leader)
        for name, process in list(self.replicas.procs.items()):
            try:
                rss = psutil.Process(process.pid).memory_info().rss
            except psutil.NoSuchProcess:
                continue
            self.tally.rss.setdefault(name, []).append((time.monotonic(), rss))

    def close(self) -> None:
        self.stop.set()
        self.replicas.stop()
        self.cluster.stop()


def _reason(job: Obj) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] == "Placed":
            return str(c.get("reason", ""))
    return ""


def summary(
    soak: Soak, tally: Tally, report: invariants.Report, repairing: int, minutes: float
) -> dict[str, Any]:
    jobs = soak.admin.jobs()
    reasons = [_reason(j) for j in jobs]
    phases = [(j.get("status") or {}).get("phase") for j in jobs]
    events = json.loads(soak.cluster.kubectl("get", "events", "-o", "json").stdout)["items"]
    per_job: dict[str, int] = {}
    for e in events:
        if e["involvedObject"].get("kind") == "TrainingJob":
            name = e["involvedObject"]["name"]
            per_job[name] = per_job.get(name, 0) + int(e.get("count") or 1)
    waits = sorted(tally.placed_after.values())
    growth = _rss_growth(tally)
    return {
        "minutes": minutes,
        "jobs_submitted": tally.submitted,
        "jobs_placed": len(tally.placed_after),
        "jobs_invalid": reasons.count("InvalidSpec"),
        "invalid_sent": tally.invalid_sent,
        "jobs_failed": phases.count("Failed"),
        "jobs_deleted": tally.deleted,
        "node_flaps": tally.flaps,
        "cordons": tally.cordons,
        "leader_kills": tally.kills,
        "leader_changes": max(0, len(tally.leaders) - 1),
        "invariant_violations": len(tally.oversubscribed) + report.violations,
        "oversubscribed_samples": len(tally.oversubscribed),
        "half_bound_after_settling": len(report.half_bound),
        "repairing_after_settling": repairing,
        "submit_to_placed_p50_s": round(_pct(waits, 0.5), 2),
        "submit_to_placed_p99_s": round(_pct(waits, 0.99), 2),
        "events_per_job_mean": round(sum(per_job.values()) / max(1, len(per_job)), 2),
        "events_per_job_max": max(per_job.values(), default=0),
        "jobs_with_events_over_5": sum(v > 5 for v in per_job.values()),
        **growth,
    }


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _rss_growth(tally: Tally) -> dict[str, Any]:
    """Per replica, RSS one minute after its start against its last sample; reported for the
    longest-lived replica (leader kills replace replicas; with --kill-minutes 0 the first
    leader lives the whole soak). Also the RSS at the middle sample, to tell warm-up from a
    steady climb."""
    best: tuple[float, int, int, int] | None = None
    for samples in tally.rss.values():
        t0 = samples[0][0]
        warm = [s for s in samples if s[0] - t0 >= 60]
        if len(warm) < 2:
            continue
        life = warm[-1][0] - warm[0][0]
        if best is None or life > best[0]:
            best = (life, warm[0][1], warm[len(warm) // 2][1], warm[-1][1])
    if best is None:
        return {"rss_start_mb": None, "rss_end_mb": None, "rss_growth": None}
    life, first, middle, last = best
    return {
        "rss_replica_minutes": round(life / 60, 1),
        "rss_start_mb": round(first / 2**20, 1),
        "rss_middle_mb": round(middle / 2**20, 1),
        "rss_end_mb": round(last / 2**20, 1),
        "rss_growth": round(last / first - 1, 3),
        "rss_growth_second_half": round(last / middle - 1, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--kill-minutes",
        type=float,
        default=6.0,
        help="mean minutes between kills (0: none)",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="rackwise-soak-"))
    soak = Soak(workdir, args.minutes, args.seed, args.kill_minutes)
    try:
        tally = soak.run()
        report, repairing = soak.settle()
        result = summary(soak, tally, report, repairing, args.minutes)
    finally:
        soak.close()
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    print(f"logs: {workdir / 'logs'}")


if __name__ == "__main__":
    main()

"""Why a pending pod waits, said where users and dashboards look: on the pod.

Every pod rackwise is responsible for and has not bound carries the condition kube-scheduler
sets on a pod it cannot place, `PodScheduled=False`, with the message of its job or group. Its
reason is kube-scheduler's `Unschedulable` when the gang waits for capacity (what autoscalers
and dashboards look for), and rackwise's own reason otherwise (`NeverFits`, `GroupIncomplete`,
`WaitingForReservation`, ...): those waits are not for capacity. A change of reason also
records a `FailedScheduling` event on the pod (the recorder aggregates repeats). A pod is
written only when what it says differs from what it should say: a new reason at once, a new
message for the same reason at most every `REFRESH_S` (a message that counts free GPUs changes
with every start elsewhere, and a large gang has a pod per rank), so a gang that keeps waiting
costs no write per cycle; binding sets `PodScheduled=True` (the API server's binding does)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduler.controller.runtime.calls import Calls
from scheduler.controller.runtime.events import Recorder, pod_ref
from scheduler.controller.runtime.objects import Condition, Pod
from scheduler.controller.runtime.status import now

Obj = dict[str, Any]
SCHEDULED = "PodScheduled"
# rackwise's reasons that mean "waits for capacity", as kube-scheduler names it
CAPACITY = {"Unplaceable": "Unschedulable"}
MESSAGE_CHARS = 1000
REFRESH_S = 60.0  # a pod's message, same reason, rewritten at most this often


def pod_reason(reason: str) -> str:
    return CAPACITY.get(reason, reason)


def _unscheduled(c: Condition) -> bool:
    return c.type == SCHEDULED and c.status == "False"


def says(pod: Pod) -> tuple[str, str] | None:
    """(reason, message) of the pod's PodScheduled=False condition, None when it has none."""
    said = pod.scheduled
    return (said.reason, said.message) if said and _unscheduled(said) else None


@dataclass
class PendingPods:
    patch: Callable[[str, str, Obj], None]  # a pod's (namespace, name, status)
    recorder: Recorder
    calls: Calls  # API errors counted and logged, never raised
    clock: Callable[[], float]  # monotonic seconds
    # pod uid -> (reason, message) last written, and when: the cache may not show it yet
    told: dict[str, tuple[tuple[str, str], float]] = field(default_factory=dict)

    def tell(self, pods: Iterable[Pod], reason: str, message: str) -> None:
        want = (pod_reason(reason), message[:MESSAGE_CHARS])
        for pod in pods:
            # a gated pod says `SchedulingGated` (the API server's): its gang says what it waits for
            if pod.node or pod.meta.deleting or pod.gates:
                continue
            old = says(pod)
            if self._current(pod.meta.uid, old, want):
                continue
            self._write(pod, want, old, f"{reason}: {message}")

    def _current(self, uid: str, old: tuple[str, str] | None, want: tuple[str, str]) -> bool:
        """Does the pod say enough already (the same reason, its message refreshed at most
        every `REFRESH_S`)?"""
        told, at = self.told.get(uid, (None, -REFRESH_S))
        if want in (old, told):
            return True
        said = told or old
        return said is not None and said[0] == want[0] and self.clock() - at < REFRESH_S

    def _write(
        self, pod: Pod, want: tuple[str, str], old: tuple[str, str] | None, event: str
    ) -> None:
        meta, said = pod.meta, pod.scheduled
        since = said.since if said and _unscheduled(said) else None
        mine = {
            "type": SCHEDULED,
            "status": "False",
            "reason": want[0],
            "message": want[1],
            "lastProbeTime": None,
            "lastTransitionTime": since or now(),
        }
        status = {"conditions": [mine]}  # merged by type: the pod's other conditions stay
        # an API error leaves nothing remembered: the pod is written again next cycle
        if not self.calls.attempt(self.patch, meta.namespace, meta.name, status):
            return
        changed = old is None or old[0] != want[0]
        args = (pod_ref(pod), "Warning", "FailedScheduling", event)
        if changed and not self.calls.attempt(self.recorder.record, *args):
            return
        self.told[meta.uid] = (want, self.clock())

    def forget(self, live: set[str]) -> None:
        """Keep only the pods that still exist (uids)."""
        self.told = {k: v for k, v in self.told.items() if k in live}

"""What the queue keeps by host number, when the cluster's hosts change under it (the operator's
nodes relabelled, replaced or listed in another order): holds keep their hosts by name, and a
lender's hosts keep when they became idle."""

from __future__ import annotations

from scheduler.model import Placement
from scheduler.model.placement import PlacementStatus, PodAssignment
from scheduler.queue import QueueConfig, SchedulingQueue
from scheduler.queue.holds import Holds
from scheduler.topology import Fabric, generate

SPEC = generate(blocks=2, racks=3, hosts=4, gpus=8)
OLD = Fabric(SPEC)
REVERSED = Fabric(SPEC.model_copy(update={"hosts": list(reversed(SPEC.hosts))}))
SMALLER = Fabric(generate(blocks=1, racks=1, hosts=4, gpus=8))


def pinned(*hosts: str) -> Placement:
    pods = tuple(PodAssignment(rank=i, host=h) for i, h in enumerate(hosts))
    return Placement(gang="p", policy="test", status=PlacementStatus.PLACED, pods=pods)


def test_a_hold_keeps_its_hosts_by_name_when_they_are_renumbered():
    holds = Holds()
    names = ("h0-0", "h2-1")
    holds.hold("p", pinned(*names), frozenset(OLD.host_index[n] for n in names))
    holds.refit(REVERSED.host_index)
    assert holds.hosts["p"] == {REVERSED.host_index[n] for n in names}
    assert holds.hosts["p"] != {OLD.host_index[n] for n in names}  # the numbers did change


def test_a_hold_on_a_host_that_is_gone_ends():
    holds = Holds()
    holds.hold("p", pinned("h0-0", "h5-3"), frozenset({0, 23}))
    holds.hold("q", pinned("h0-1"), frozenset({1}))
    holds.refit(SMALLER.host_index)
    assert ("p" in holds.pins, "p" in holds.hosts) == (False, False)
    assert holds.hosts["q"] == {SMALLER.host_index["h0-1"]}


def test_a_lenders_idle_hosts_keep_when_they_became_idle():
    lending = SchedulingQueue(QueueConfig())._lending
    lending.idle_since = {OLD.host_index["h0-0"]: 5.0, OLD.host_index["h5-3"]: 7.0}
    lending.refit(OLD, REVERSED)
    assert lending.idle_since == {
        REVERSED.host_index["h0-0"]: 5.0,
        REVERSED.host_index["h5-3"]: 7.0,
    }
    lending.refit(REVERSED, SMALLER)
    assert lending.idle_since == {SMALLER.host_index["h0-0"]: 5.0}

"""What a gang uses of each pool's hosts (queue/teams/lent.py): its parts sum to its whole demand,
roles counted pod by pod; a gang on its own pool's hosts, or on hosts the fabric lacks, has no
lent parts; the ledger's moves take from its own pool exactly what they charge to the lender."""

from __future__ import annotations

from scheduler.model import GangRequest, Placement
from scheduler.model.gang import Role
from scheduler.queue import Running
from scheduler.queue.teams.lent import Lent, demand_by_pool, lent_parts
from scheduler.queue.teams.quotas import demand

POOLS = {"a0": "training", "a1": "training", "b0": "online", "b1": "online"}
GANG = GangRequest(
    name="g",
    pods=3,
    gpus_per_pod=8,
    cpu_milli_per_pod=1000,
    memory_mib_per_pod=512,
    pool="training",
    roles=(Role(name="launcher", pods=1, cpu_milli_per_pod=250, memory_mib_per_pod=64),),
)


def placed(*hosts: str) -> Placement:
    pods = [{"rank": i, "host": h} for i, h in enumerate(hosts[:3])]
    pods.append({"rank": 3, "host": hosts[3], "role": "launcher", "role_rank": 0})
    return Placement.model_validate({"gang": "g", "policy": "t", "status": "placed", "pods": pods})


def test_parts_sum_to_the_gangs_demand_roles_pod_by_pod():
    parts = demand_by_pool(POOLS, GANG, placed("a0", "b0", "b1", "a1"))
    assert parts == {"training": (8, 1250, 576), "online": (16, 2000, 1024)}
    sums = tuple(sum(d[i] for d in parts.values()) for i in range(3))
    assert sums == demand(GANG)


def test_no_parts_on_its_own_pool_or_on_hosts_the_fabric_lacks():
    assert lent_parts(POOLS, GANG, placed("a0", "a0", "a1", "a1")) is None
    assert lent_parts(POOLS, GANG, placed("a0", "b0", "gone", "a1")) is None
    assert lent_parts(POOLS, GANG, placed("a0", "b0", "a1", "a1")) is not None


def test_the_ledgers_moves_take_from_its_own_pool_what_they_charge_the_lender():
    r = Running("g", GANG, placed("a0", "b0", "b1", "a1"), 0.0, "team")
    lent = Lent.of(POOLS, [(r, "team")])
    assert sorted(lent.moves()) == [
        ("team", "online", (16, 2000, 1024)),
        ("team", "training", (-16, -2000, -1024)),
    ]
    assert (lent.into, lent.out) == ({("team", "online"): 16}, {("team", "training"): 16})
    assert (lent.gpus_in(r, "training"), lent.gpus_in(r, "online")) == (8, 16)
    assert Lent.of(POOLS, [(r, None)]).moves() == []  # a gang of no queue counts nowhere

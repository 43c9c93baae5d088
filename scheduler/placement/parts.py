"""Every part of a gang in one decision: the workers and each role placed together by CP-SAT.

Contract. Takes the snapshot, a gang with roles, the objective's weights and a work limit.
Decides, in one model, how many pods of each part (the workers, each role) go on each host of
a region of the gang's pool: hosts share their GPUs, CPU, memory, extended resources and pod
slots among the parts; each part keeps its own eligibility (pool, node constraints), its TP
groups and slices, and its own required level (one domain of that level for the part); the
gang's required level holds every part that names none of its own in one shared domain (a
leader/worker group in one rack: Kueue's PodSet group); the workers keep their per-rack cap.
It minimises J over the gradient ring (the workers and every role with `gradients`), exactly
as placement.scoring.objective counts it, then keeps the roles outside the ring in the ring's
racks where it can. Promises: a placement it returns keeps every rule above (placement.validate
checks it again); None when the model is infeasible on every region tried or the work limit
ends first; no optimality is claimed here (the caller claims `optimal` only where J meets a
valid lower bound: the model's weights are rounded). Regions: the whole pool when it
has at most `MAX_HOSTS` hosts with room, else the smallest domains, level by level, whose room
could hold every part (at most `MAX_REGIONS` of them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from scheduler.model.gang import GangRequest, objective_of
from scheduler.model.topology import Tier
from scheduler.placement import slices
from scheduler.placement.capacity import Capacity
from scheduler.placement.cpsat.model import SCALE, total
from scheduler.placement.roles import as_gang, grouped
from scheduler.placement.snapshot import Snapshot

MAX_HOSTS = 256  # hosts with room in one model
MAX_REGIONS = 6  # domains tried when the pool is larger
WORKERS = ""


@dataclass(frozen=True)
class Part:
    name: str  # WORKERS or the role's name
    gang: GangRequest  # the part as a gang of its own (capacity, slices, constraints)
    ring: bool  # a member of the gradient ring
    group: bool  # kept in the gang's group-wide domain
    slots: dict[int, int]  # host -> pods of this part alone it can take


@dataclass(frozen=True)
class Joint:
    counts: dict[str, dict[int, int]]  # part -> host -> pods


def parts_of(snapshot: Snapshot, gang: GangRequest) -> list[Part]:
    """The workers, then each role in the gang's order."""
    out = [Part(WORKERS, gang, True, True, Capacity.of(snapshot, gang).slots)]
    for role in gang.roles:
        alone = as_gang(gang, role)
        group = grouped(gang, role)
        out.append(
            Part(role.name, alone, role.gradients, group, Capacity.of(snapshot, alone).slots)
        )
    return out


def solve(
    snapshot: Snapshot, gang: GangRequest, weights: Sequence[float], fresh: float, work: float
) -> Joint | None:
    parts = parts_of(snapshot, gang)
    regions = _regions(snapshot, parts)
    for hosts in regions:
        found = _solve_in(snapshot, gang, parts, hosts, weights, fresh, work)
        if found is not None:
            return Joint(found)
    return None


def _regions(snapshot: Snapshot, parts: list[Part]) -> list[list[int]]:
    """The hosts to try: the whole pool, or its smallest domains first when it is large."""
    room = sorted(set().union(*(p.slots for p in parts)))
    if len(room) <= MAX_HOSTS:
        return [room]
    fabric = snapshot.fabric
    out: list[list[int]] = []
    for level in range(Tier.RACK, fabric.depth):
        column = fabric.columns[level]
        by_domain: dict[int, list[int]] = {}
        for h in room:
            by_domain.setdefault(int(column[h]), []).append(h)
        fits = [
            hs
            for hs in by_domain.values()
            if len(hs) <= MAX_HOSTS
            and all(sum(p.slots.get(h, 0) for h in hs) >= p.gang.pods for p in parts)
        ]
        fits.sort(key=lambda hs: (len(hs), hs[0]))
        out += fits[: MAX_REGIONS - len(out)]
        if len(out) >= MAX_REGIONS:
            break
    return out


def _solve_in(
    snapshot: Snapshot,
    gang: GangRequest,
    parts: list[Part],
    hosts: list[int],
    weights: Sequence[float],
    fresh: float,
    work: float,
) -> dict[str, dict[int, int]] | None:
    jm = _JointModel(snapshot, gang, parts, hosts)
    jm.build(weights, fresh)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = work
    solver.parameters.max_time_in_seconds = 60.0  # a far safety net: the work limit decides
    status = solver.solve(jm.m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return {
        p.name: {h: n for h in hosts if (n := solver.value(jm.x[p.name][h])) > 0} for p in parts
    }


def _needs(g: GangRequest, extended: list[str]) -> list[int]:
    """What one pod of the part takes: GPUs, CPU, memory, a pod slot, each extended resource."""
    own = [g.gpus_per_pod, g.cpu_milli_per_pod, g.memory_mib_per_pod, 1]
    return own + [g.extended_per_pod.get(n, 0) for n in extended]


class _JointModel:
    def __init__(
        self, snapshot: Snapshot, gang: GangRequest, parts: list[Part], hosts: list[int]
    ) -> None:
        self.snapshot, self.gang, self.parts, self.hosts = snapshot, gang, parts, hosts
        self.fabric = snapshot.fabric
        self.m = cp_model.CpModel()
        self.x = {
            p.name: {h: self.m.new_int_var(0, p.slots.get(h, 0), f"x{p.name}_{h}") for h in hosts}
            for p in parts
        }

    def build(self, weights: Sequence[float], fresh: float) -> None:
        for p in self.parts:
            self.m.add(total(self.x[p.name].values()) == p.gang.pods)
            self._groups(p)
        self._shared()
        for p in self.parts:  # a role's own required level: a domain of its own
            if not p.group and p.gang.required_level is not None:
                self._one_domain([p], self.fabric.index(p.gang.required_level))
        if self.gang.required_level is not None:
            together = [p for p in self.parts if p.group]
            self._one_domain(together, self.fabric.index(self.gang.required_level))
        if self.gang.max_pods_per_rack is not None:
            self._rack_cap(self.gang.max_pods_per_rack)
        self._objective(weights, fresh)

    def _shared(self) -> None:
        """Each host's resources, summed over the parts."""
        snap = self.snapshot
        names = sorted({n for p in self.parts for n in p.gang.extended_per_pod})
        columns = [snap.free_gpus, snap.free_cpu, snap.free_mem, snap.free_pods]
        columns += [snap.ext(n) for n in names]
        for i, free in enumerate(columns):
            needs = [_needs(p.gang, names)[i] for p in self.parts]
            for h in self.hosts:
                terms = [n * self.x[p.name][h] for p, n in zip(self.parts, needs, strict=True) if n]
                if len(terms) > 1:  # one part alone is held by its own slots
                    self.m.add(total(terms) <= int(free[h]))

    def _groups(self, p: Part) -> None:
        """TP groups and slices: whole groups per host and per domain of every sliced level."""
        size = slices.sizes(self.fabric, p.gang)
        real = set(self.fabric.real_nvlink)
        for level in range(self.fabric.depth):
            below = size[level - 1] if level else 1
            if size[level] <= below:
                continue
            column = self.fabric.columns[level]
            members: dict[int, list[cp_model.IntVar]] = {}
            for h in self.hosts:
                key = int(column[h])
                if level == Tier.NVLINK and key not in real:
                    key = -1 - h  # a host outside NVLink is its own NVLink domain
                members.setdefault(key, []).append(self.x[p.name][h])
            for d, xs in members.items():
                groups = self.m.new_int_var(0, p.gang.pods // size[level], f"g{p.name}_{level}_{d}")
                self.m.add(total(xs) == size[level] * groups)

    def _one_domain(self, parts: list[Part], level: int) -> None:
        column = self.fabric.columns[level]
        chosen: dict[int, cp_model.IntVar] = {}
        for h in self.hosts:
            d = int(column[h])
            if d not in chosen:
                chosen[d] = self.m.new_bool_var(f"d{level}_{d}_{parts[0].name}")
            for p in parts:
                self.m.add(self.x[p.name][h] <= p.slots.get(h, 0) * chosen[d])
        self.m.add_exactly_one(chosen.values())

    def _rack_cap(self, cap: int) -> None:
        racks: dict[int, list[cp_model.IntVar]] = {}
        for h in self.hosts:
            racks.setdefault(int(self.fabric.columns[Tier.RACK][h]), []).append(self.x[WORKERS][h])
        for xs in racks.values():
            self.m.add(total(xs) <= cap)

    def _objective(self, weights: Sequence[float], fresh: float) -> None:
        """J of the ring (scoring.objective, in integer units), then the other roles near it."""
        m, fabric = self.m, self.fabric
        ring = [p for p in self.parts if p.ring]
        used = {h: self._used(h, ring, "r") for h in self.hosts}
        spans, domains = [], []
        for level in range(fabric.depth):
            per = self._domains(level, used, "r")
            domains.append(per)
            spans.append(total(per.values()))
        many = []
        for level, k in enumerate(spans):
            b = m.new_bool_var(f"many{level}")
            m.add(k >= 2).only_enforce_if(b)
            m.add(k <= 1).only_enforce_if(~b)
            many.append(b)
        top = max(weights)
        prefs = [top * self.gang.preferred_levels.get(n, 0.0) for n in fabric.levels]
        j = total(
            round(w * SCALE) * (k - 1 + b) for w, k, b in zip(weights, spans, many, strict=True)
        )
        j += total(round(p * SCALE) * (k - 1) for p, k in zip(prefs, spans, strict=True) if p)
        j += self._fresh(domains[Tier.RACK], many[Tier.RACK], fresh)
        if objective_of(self.gang) != "pack":
            j = total([])  # inference pools: any placement that keeps the rules
        others = [p for p in self.parts if not p.ring]
        apart = total([])
        if others:
            near = {h: self._used(h, others, "o") for h in self.hosts}
            outside = self._domains(Tier.RACK, near, "o")
            ring_racks = domains[Tier.RACK]
            away = []
            for d, q in outside.items():
                t = m.new_bool_var(f"away{d}")
                m.add(t >= q - ring_racks[d])
                away.append(t)
            apart = total(away)
        m.minimize((len(fabric.names[Tier.RACK]) + 1) * j + apart)

    def _used(self, h: int, parts: list[Part], tag: str) -> cp_model.IntVar:
        u = self.m.new_bool_var(f"{tag}u{h}")
        xs = [self.x[p.name][h] for p in parts]
        top = sum(p.slots.get(h, 0) for p in parts)
        self.m.add(total(xs) <= top * u)
        self.m.add(total(xs) >= u)
        return u

    def _domains(
        self, level: int, used: dict[int, cp_model.IntVar], tag: str
    ) -> dict[int, cp_model.IntVar]:
        if level == Tier.HOST:
            return dict(used)
        column = self.fabric.columns[level]
        inside: dict[int, list[cp_model.IntVar]] = {}
        for h, u in used.items():
            inside.setdefault(int(column[h]), []).append(u)
        out = {}
        for d, us in inside.items():
            y = self.m.new_bool_var(f"{tag}y{level}_{d}")
            for u in us:
                self.m.add_implication(u, y)
            self.m.add(total(us) >= y)
            out[d] = y
        return out

    def _fresh(
        self, racks: dict[int, cp_model.IntVar], many: cp_model.IntVar, fresh: float
    ) -> cp_model.LinearExpr:
        """scoring.objective's fresh-rack term: each fully free rack used, once the ring spans
        two racks or more."""
        weight = round(fresh * SCALE)
        if weight <= 0:
            return total([])
        busy = self.snapshot.busy_racks()
        terms = []
        for d, y in racks.items():
            if d in busy:
                continue
            z = self.m.new_bool_var(f"fresh{d}")
            self.m.add(z >= y + many - 1)
            terms.append(z)
        return weight * total(terms)

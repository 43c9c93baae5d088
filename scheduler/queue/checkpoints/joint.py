"""Joint placement: the gangs one cycle starts, placed again together with the first gang each
pool could not start, when that starts more of them or costs less.

Contract. `improve` takes the capacity after the cycle's starts (`work`), those starts (key,
gang, placement, in the order the queue made them: the incumbent), the blocked gangs that may
join (at most one per pool: the one the pool waits for), the hosts each gang may not newly
take (held for a reservation or a preemptor other than its own) and the placement rules. It
releases the starts and places them and the blocked gangs again in other orders (largest
first, then smallest first), each one-by-one on what the earlier ones left. It promises:
- every started gang stays started: an alternative that cannot place one of them is dropped;
- a blocked gang joins only in an alternative that places it and all the starts;
- no gang is placed on a host forbidden to it that it did not already hold, so reservations
  and preemptors' nominated hosts stay theirs;
- the alternative taken starts more gangs than the incumbent, or as many at a lower total J
  (each gang's objective as placed); the J saved is reported (negative when more started);
- at most `limit` gangs take part; deterministic: fixed orders, no clock is read;
- nothing is placed when no alternative can win: starts that cost J 0 (one host each; J is
  never below 0) and blocked gangs without whole-pod GPU room on what the starts free.
Only training gangs take part: inference pools do not minimise J."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduler.model.gang import GangRequest, objective_of
from scheduler.model.placement import PlaceConfig, Placement
from scheduler.placement import Snapshot, place_one

Start = tuple[str, GangRequest, Placement]  # key, gang, placement
Gang = tuple[str, GangRequest]


@dataclass(frozen=True)
class Joint:
    placements: dict[str, Placement]  # key -> the gang's placement (starts and joined)
    joined: list[str]  # blocked gangs it starts
    gain: float  # incumbent total J of the starts - the alternative's total J of the same
    tried: list[Placement]  # every placement computed, for the driver's solve metrics


def eligible(gang: GangRequest) -> bool:
    return objective_of(gang) == "pack"


def improve(
    work: Snapshot,
    starts: Sequence[Start],
    blocked: Sequence[Gang],
    forbidden: Mapping[str, frozenset[int]],
    config: PlaceConfig,
    limit: int,
) -> Joint | None:
    chosen = [s for s in starts if eligible(s[1])][:limit]
    waiting = [b for b in blocked if eligible(b[1])][: max(0, limit - len(chosen))]
    if len(chosen) + len(waiting) < 2 or not chosen:
        return None
    base = work.copy()
    for _, gang, placement in chosen:
        base.release(gang, placement)
    if all(p.objective == 0 for _, _, p in chosen) and not any(_room(base, g) for _, g in waiting):
        return None  # nothing to gain (J is never below 0) and no one can join (`_room`)
    held = {k: _hosts(base, p) for k, _, p in chosen}
    incumbent = {k: p.objective for k, _, p in chosen}
    gangs = [(k, g) for k, g, _ in chosen] + list(waiting)
    best: tuple[tuple[int, float], dict[str, Placement]] | None = None
    tried: list[Placement] = []
    for order in _orders(gangs):
        found = _sequential(base, order, forbidden, held, config, tried)
        if found is None or not all(k in found for k in held):
            continue
        score = (len(found) - len(chosen), sum(incumbent.values()) - _total(found, held))
        if score > (0, 1e-9 * max(1.0, sum(incumbent.values()))) and (
            best is None or score > best[0]
        ):
            best = (score, found)
    if best is None:
        return None
    (_, gain), found = best
    joined = [k for k, _ in waiting if k in found]
    return Joint(found, joined, gain, tried)


def _room(base: Snapshot, gang: GangRequest) -> bool:
    """Whether the gang may fit on `base`, by whole-pod GPU room on its pool's up hosts alone:
    each of its workers needs its GPUs on one host, whatever else it asks (roles, slices,
    constraints, hints only ask more), and every order places it on what `base` has or less.
    Most single-pod starts cost J 0, and the gang a pool waits for seldom fits even with the
    cycle's starts released: then no alternative can win, and none is placed."""
    if not gang.gpus_per_pod:
        return True
    # the hosts a placement of it may use: its pool's and any lent to it now, up
    room = base.free_gpus[base.pool_up(gang.pool)] // gang.gpus_per_pod
    return int(room[room > 0].sum()) >= gang.pods


def _hosts(snapshot: Snapshot, placement: Placement) -> frozenset[int]:
    index = snapshot.fabric.host_index
    return frozenset(index[h] for h in placement.hosts())


def _total(found: Mapping[str, Placement], keys: Mapping[str, object]) -> float:
    return sum(p.objective for k, p in found.items() if k in keys)


def _orders(gangs: list[Gang]) -> list[list[Gang]]:
    """Largest first (big gangs get the compact domains), then smallest first; the queue's
    own order too when blocked gangs join (they come after the starts there)."""
    out: list[list[Gang]] = []
    for sign in (-1, 1):
        ranked = sorted(range(len(gangs)), key=lambda i: (sign * gangs[i][1].all_gpus, i))
        order = [gangs[i] for i in ranked]
        if order not in out:
            out.append(order)
    return out


def _sequential(
    base: Snapshot,
    order: list[Gang],
    forbidden: Mapping[str, frozenset[int]],
    held: Mapping[str, frozenset[int]],
    config: PlaceConfig,
    tried: list[Placement],
) -> dict[str, Placement] | None:
    """Each gang on what the earlier left, off its forbidden hosts; a blocked gang that does
    not fit is skipped, a start that does not fit ends the order."""
    work = base.copy()
    out: dict[str, Placement] = {}
    for key, gang in order:
        off = forbidden.get(key, frozenset()) - held.get(key, frozenset())
        view = work
        if off:
            view = work.copy()
            view.down |= off
        placement = place_one(view, gang, config)
        tried.append(placement)
        if not placement.placed:
            if key in held:
                return None
            continue
        work.apply(gang, placement)
        out[key] = placement
    return out

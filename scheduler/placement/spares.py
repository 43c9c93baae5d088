"""Spare hosts: the idle hosts each multi-host NVLink domain keeps out of service.

Contract. Takes a snapshot whose fabric's NVLink level declares `spares` s (LevelSpec.spares;
a GB200 NVL72 rack of 18 trays with s = 2 is scheduled as 16, as CoreWeave runs them). Decides
which hosts are held back: in each multi-host NVLink domain, as many idle up hosts as it takes
for s of its hosts to be out of service, a down host counting as one (a failed tray is what a
spare stands in for), the highest-numbered idle hosts first. Promises:
- a host with anything on it is never held back, so nothing running is touched;
- with the held-back hosts marked down, every placement on the rest keeps at most n - s hosts
  of each domain in service, and so does any sequence of starts and ends until the hosts are
  chosen again: the hosts not held back number n - s (or fewer), and only they take pods. Hosts
  of a domain alike (its trays) are interchangeable, so which idle ones are held back changes
  no placement's J or fit;
- every engine reads held-back hosts as down, so each of them, the peers' baselines and the
  counting proofs (reasons.never_fits) included, places under the rule by construction;
- a domain with more than n - s hosts already in use (spares declared while it ran, or pods
  placed by another scheduler) has all its idle hosts held back and nothing moved.
"""

from __future__ import annotations

import numpy as np

from scheduler.model.topology import Tier
from scheduler.placement.snapshot import Snapshot
from scheduler.topology.fabric import ranks


def held_back(snapshot: Snapshot) -> set[int]:
    """The idle up hosts kept out of service as spares (empty where none are declared)."""
    fabric = snapshot.fabric
    spares = fabric.spares
    if not spares or not fabric.real_nvlink:
        return set()
    column = fabric.columns[Tier.NVLINK]
    n = len(fabric.names[Tier.NVLINK])
    up = snapshot.up_mask()
    idle = up & (snapshot.free_gpus == fabric.gpus) & (snapshot.free_cpu == fabric.cpu_milli)
    idle &= snapshot.free_pods == fabric.max_pods
    sizes = np.bincount(column, minlength=n)
    missing = np.where(sizes > 1, spares - np.bincount(column, weights=~up, minlength=n), 0)
    hosts = np.flatnonzero(idle)[::-1]  # the highest-numbered first
    domains = column[hosts]
    order = np.argsort(domains, kind="stable")
    ranked = domains[order]
    return set(hosts[order][ranks(ranked) < missing[ranked]].tolist())


def hold_back(snapshot: Snapshot) -> Snapshot:
    """The snapshot with its spares down: itself where none are held back, else a copy."""
    held = held_back(snapshot)
    if not held:
        return snapshot
    out = snapshot.copy()
    out.down |= held
    return out

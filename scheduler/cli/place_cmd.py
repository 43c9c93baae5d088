"""`rackwise place`: one placement decision per gang, as a table or one JSON document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from scheduler.cli.inputs import snapshot_from
from scheduler.io import InputError, load_gangs
from scheduler.model import PlaceConfig, Placement
from scheduler.placement import POLICIES, UnknownPolicyError, place, spares
from scheduler.placement.reasons import unknown_levels
from scheduler.placement.roles import problem


def place_cmd(
    topology: Annotated[Path, typer.Option(help="YAML topology or Lingjun CSV")],
    gangs: Annotated[Path, typer.Option(help="YAML list of gang requests")],
    state: Annotated[Path | None, typer.Option(help="usage already on the hosts")] = None,
    policy: Annotated[str, typer.Option(help=f"one of {', '.join(POLICIES)}")] = "rackwise",
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document")] = False,
    time_limit: Annotated[float, typer.Option(min=0.01, help="solver seconds per gang")] = 1.0,
    seed: Annotated[int, typer.Option(help="solver and random-fit seed")] = 0,
    gpus: Annotated[int, typer.Option(help="GPUs per host for the Lingjun CSV")] = 8,
) -> None:
    """Place gangs on a topology and print hosts, ranks, domains, cost, bound, gap and time.

    Per gang: the hosts and the ranks on each; domains, how many of each level it spans; cross
    GB, the GB its ring all-reduce sends across each level per training step; objective, J,
    what rackwise minimises and every policy is scored on (weighted ring crossings, plus the
    penalties of preferred levels and of fresh racks broken; lower is better), with a proven
    lower bound on J and the gap to it, or "bound n/a" where none is claimed (inference gangs,
    which are spread, not packed); traffic cost, the cross GB weighted per level alone. Exit 0
    when every gang is placed, 1 when one is not, 2 for bad input."""
    if policy not in POLICIES:
        raise UnknownPolicyError(f"--policy: unknown {policy!r}; choose from {', '.join(POLICIES)}")
    snapshot = spares.hold_back(snapshot_from(topology, state, gpus))  # spare trays stay idle
    requests = load_gangs(gangs)
    for gang in requests:  # a level the fabric lacks is the file's error, not a wait
        wrong = unknown_levels(snapshot.fabric, gang) or problem(snapshot.fabric, gang)
        if wrong is not None:
            raise InputError(f"{gangs}: gang {gang.name}: {wrong}")
    config = PlaceConfig.of(policy=policy, time_limit_s=time_limit, seed=seed)
    results = place(snapshot, requests, config)
    if as_json:
        typer.echo(json.dumps({"placements": [r.model_dump(mode="json") for r in results]}))
    else:
        console = Console()
        for result in results:
            console.print(_table(result))
    # the exit code is the contract, table or JSON: 0 all placed, 1 a gang is unplaceable,
    # 2 bad input (cli/errors.py)
    if any(not r.placed for r in results):
        raise typer.Exit(1)


CAPTION = (
    "objective: J, lower is better (weighted ring crossings + preference penalties); bound: "
    "a proven lower bound on J; traffic cost: the cross GB weighted per level alone"
)


def _table(p: Placement) -> Table:
    title = f"{p.gang}: {p.status.value} by {p.policy}"
    if not p.placed:
        table = Table(title=title, show_header=False)
        table.add_row("reason", p.reason)
        return table
    table = Table(title=title, show_header=False)
    parts: dict[str, dict[str, list[int]]] = {}  # part ("" the workers) -> host -> ranks
    for pod in p.pods:
        parts.setdefault(pod.role, {}).setdefault(pod.host, []).append(pod.rank)
    for part, ranks in parts.items():
        label = f"role {part}" if part else ("workers" if len(parts) > 1 else "hosts")
        table.add_row(
            label, ", ".join(f"{h}x{len(r)} (ranks {_span(r)})" for h, r in ranks.items())
        )
    table.add_row("domains", "  ".join(f"{lv}={n}" for lv, n in p.domains.items()))
    table.add_row("cross GB", "  ".join(f"{lv}={gb:g}" for lv, gb in p.traffic_gb.items()))
    if p.optimal:
        proof = f"bound {p.bound:.3f}, proven optimal"
    elif p.bound is not None and p.gap is not None:
        proof = f"bound {p.bound:.3f}, gap {p.gap:.2%}"
    else:
        proof = "bound n/a"
    table.add_row("objective", f"{p.objective:.3f} ({proof}, {p.engine})")
    table.add_row("traffic cost", f"{p.cost:.3f}")
    table.add_row("time", f"{p.solve_seconds * 1000:.1f} ms")
    table.caption = CAPTION
    return table


def _span(ranks: list[int]) -> str:
    """Exact rank lists: runs of consecutive ranks as first-last, the rest one by one
    ("0-2" only when 1 is there too)."""
    runs: list[list[int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    return ",".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)

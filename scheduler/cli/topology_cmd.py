"""`rackwise topology generate|show`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.tree import Tree

from scheduler.cli.inputs import snapshot_from
from scheduler.io import InputError
from scheduler.model.topology import Tier
from scheduler.placement import Snapshot, spares
from scheduler.pools import check_pool
from scheduler.topology import generate, save_topology
from scheduler.topology.fabric import UnknownLevelError
from scheduler.topology.sources import TopologyError

app = typer.Typer(
    help="Generate and inspect fabric topologies.", no_args_is_help=True, add_completion=False
)


def parse_shares(text: str) -> dict[str, float]:
    """`training=0.7,online-inference=0.3` -> {pool: share}: pools `place` knows, positive
    shares that sum to 1 (a fabric whose pools `place` then refuses helps nobody)."""
    shares: dict[str, float] = {}
    for part in filter(None, text.split(",")):
        name, equals, value = part.partition("=")
        if not equals:
            raise InputError(f"--pools: {part!r} is not POOL=SHARE")
        try:
            shares[check_pool(name.strip())] = float(value)
        except ValueError as exc:
            raise InputError(f"--pools: {part!r}: {exc}") from exc
    if any(share <= 0 for share in shares.values()) or abs(sum(shares.values()) - 1) > 1e-6:
        raise InputError(f"--pools: shares must be positive and sum to 1, got {text!r}")
    return shares


@app.command("generate")
def generate_cmd(
    output: Annotated[Path, typer.Option("-o", "--output", help="YAML file to write")],
    blocks: Annotated[int, typer.Option(min=1, help="spines (blocks)")] = 2,
    racks: Annotated[int, typer.Option(min=1, help="racks per block")] = 4,
    hosts: Annotated[int, typer.Option(min=1, help="hosts per rack")] = 4,
    gpus: Annotated[int, typer.Option(min=0, help="GPUs per host")] = 8,
    nvlink: Annotated[int, typer.Option(min=0, help="hosts per NVLink domain (0: none)")] = 0,
    pools: Annotated[str, typer.Option(help="share of racks per pool")] = "training=1",
    spares: Annotated[int, typer.Option(min=0, help="idle spare hosts per NVLink domain")] = 0,
) -> None:
    """Write a leaf-spine fabric of blocks x racks x hosts x GPUs."""
    try:
        spec = generate(blocks, racks, hosts, gpus, nvlink, parse_shares(pools), spares=spares)
    except TopologyError as exc:
        raise InputError(f"--spares: {exc}") from exc
    save_topology(spec, output)
    typer.echo(f"wrote {output}: {len(spec.hosts)} hosts, {sum(h.gpus for h in spec.hosts)} GPUs")


@app.command("show")
def show_cmd(
    topology: Annotated[Path, typer.Argument(help="YAML topology or Lingjun CSV")],
    state: Annotated[Path | None, typer.Option(help="usage already on the hosts")] = None,
    gpus: Annotated[int, typer.Option(help="GPUs per host for the Lingjun CSV")] = 8,
    depth: Annotated[str, typer.Option(help="lowest level shown")] = "rack",
) -> None:
    """Print the level tree with free GPUs per domain (a down host, or an idle tray held back
    as a spare, offers none; each domain says how many of its hosts are either)."""
    snapshot = snapshot_from(topology, state, gpus)
    try:
        lowest = snapshot.fabric.index(depth)
    except UnknownLevelError as exc:
        raise InputError(f"--depth: {exc}") from exc
    Console().print(render_tree(snapshot, lowest))


def render_tree(snapshot: Snapshot, lowest: int) -> Tree:
    fabric = snapshot.fabric
    held = spares.held_back(snapshot)
    free: list[dict[int, int]] = [{} for _ in range(fabric.depth)]
    total: list[dict[int, int]] = [{} for _ in range(fabric.depth)]
    down: list[dict[int, tuple[int, int]]] = [{} for _ in range(fabric.depth)]
    out = snapshot.down | held
    offered = [0 if h in out else g for h, g in enumerate(snapshot.free_gpus)]
    for h, host in enumerate(fabric.hosts):
        for level in range(fabric.depth):
            d = fabric.domain[level][h]
            free[level][d] = free[level].get(d, 0) + offered[h]
            total[level][d] = total[level].get(d, 0) + host.gpus
            was = down[level].get(d, (0, 0))
            down[level][d] = (was[0] + (h in snapshot.down), was[1] + (h in held))
    gpus = sum(h.gpus for h in fabric.hosts)
    whole = (len(snapshot.down), len(held))
    root = Tree(f"fabric: {sum(offered)}/{gpus} GPUs free{_down(*whole)}")
    nodes: dict[tuple[int, int], Tree] = {}
    for h in fabric.dfs_order:
        parent = root
        for level in range(fabric.top, lowest - 1, -1):
            d = fabric.domain[level][h]
            if level == Tier.NVLINK and d not in fabric.real_nvlink:
                continue  # a host outside NVLink is its own domain: show it once, as a host
            key = (level, d)
            if key not in nodes:
                pool = f" [{fabric.hosts[h].pool}]" if level <= Tier.RACK else ""
                label = f"{fabric.levels[level]} {fabric.display(level, d)}: "
                counts = f"{free[level][d]}/{total[level][d]} free{_down(*down[level][d])}"
                nodes[key] = parent.add(f"{label}{counts}{pool}")
            parent = nodes[key]
    return root


def _down(hosts: int, held: int = 0) -> str:
    said = f", {hosts} host{'s' if hosts != 1 else ''} down" if hosts else ""
    return said + (f", {held} held as spare{'s' if held != 1 else ''}" if held else "")

"""Where topologies come from: YAML files, a generator, the Lingjun CSV, node label maps."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from scheduler.model.topology import HostSpec, TopologySpec


class TopologyError(ValueError):
    """A topology source is unusable; the message names the file and the field."""


class LabelKeys(BaseModel):
    """Node label keys per level. Defaults are rackwise's own; Kueue/Topograph users can point
    these at e.g. `fabric.topograph.run/tier-1`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    nvlink: str = "rackwise.io/nvlink"
    rack: str = "rackwise.io/rack"
    spine: str = "rackwise.io/spine"
    core: str = "rackwise.io/core"
    pool: str = "rackwise.io/pool"

    def for_level(self) -> dict[str, str]:
        return {"nvlink": self.nvlink, "rack": self.rack, "spine": self.spine, "core": self.core}


def generate(
    blocks: int,
    racks: int,
    hosts: int,
    gpus: int = 8,
    nvlink: int = 0,
    pools: Mapping[str, float] | None = None,
    base: TopologySpec | None = None,
) -> TopologySpec:
    """Leaf-spine fabric: `blocks` spines x `racks` racks x `hosts` hosts x `gpus` GPUs.

    `nvlink` > 0 groups that many consecutive hosts of a rack into one NVLink domain. `pools`
    gives each pool its share of racks, assigned block-interleaved so every pool sees the fabric.
    """
    total_racks = blocks * racks
    owners = _rack_pools(total_racks, pools or {"training": 1.0})
    out = []
    for b in range(blocks):
        for r in range(racks):
            rack_no = b * racks + r
            for h in range(hosts):
                domains = {"rack": f"r{rack_no}", "spine": f"s{b}", "core": "c0"}
                if nvlink > 0:
                    domains["nvlink"] = f"nvl{h // nvlink}"
                out.append(
                    HostSpec(
                        name=f"h{rack_no}-{h}",
                        gpus=gpus,
                        pool=owners[rack_no],
                        domains=domains,
                    )
                )
    levels = (
        base.levels
        if base
        else TopologySpec.model_fields["levels"].get_default(call_default_factory=True)
    )
    return TopologySpec(levels=levels, hosts=tuple(out))


def _rack_pools(total: int, shares: Mapping[str, float]) -> list[str]:
    """Assign racks to pools by share, spreading each pool across the fabric (Bresenham)."""
    weight = sum(shares.values())
    if weight <= 0:
        raise TopologyError("pool shares must sum to more than zero")
    owners: list[str] = []
    credit = dict.fromkeys(shares, 0.0)
    for _ in range(total):
        for pool, share in shares.items():
            credit[pool] += share / weight
        pool = max(credit, key=lambda p: credit[p])
        credit[pool] -= 1.0
        owners.append(pool)
    return owners


def from_lingjun_csv(
    path: Path, gpus: int = 8, pools: Mapping[str, float] | None = None
) -> TopologySpec:
    """Alibaba Lingjun 3-tier Clos: DSW core, PSW aggregation, ToR = the (PSW, ASW) pair."""
    rows = _read_csv(path, ("ip", "DSW", "PSW", "ASW"))
    racks = sorted({(r["PSW"], r["ASW"]) for r in rows})
    owners = dict(zip(racks, _rack_pools(len(racks), pools or {"training": 1.0}), strict=True))
    hosts = tuple(
        HostSpec(
            name=f"lj-{r['ip'][:12]}",
            gpus=gpus,
            pool=owners[(r["PSW"], r["ASW"])],
            domains={"rack": r["ASW"], "spine": r["PSW"], "core": r["DSW"]},
        )
        for r in rows
    )
    return TopologySpec(hosts=hosts)


def _read_csv(path: Path, columns: Iterable[str]) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            missing = set(columns) - set(reader.fieldnames or ())
            if missing:
                raise TopologyError(f"{path}: missing columns {sorted(missing)}")
            rows = list(reader)
    except OSError as exc:
        raise TopologyError(f"{path}: {exc.strerror}") from exc
    for number, row in enumerate(rows, start=2):
        if any(not row.get(c) for c in columns):
            raise TopologyError(f"{path}:{number}: empty field in {dict(row)}")
    return rows


def from_node_labels(
    nodes: Iterable[Mapping[str, object]], keys: LabelKeys | None = None
) -> TopologySpec:
    """Nodes as the operator sees them: {name, labels, gpus, cpu_milli, memory_mib}. A node
    without a rack label is its own rack, so an unlabelled cluster still schedules."""
    keys = keys or LabelKeys()
    hosts = []
    for node in nodes:
        name = str(node["name"])
        labels = {str(k): str(v) for k, v in dict(node.get("labels") or {}).items()}  # type: ignore[call-overload]
        domains = {lv: labels[key] for lv, key in keys.for_level().items() if key in labels}
        domains.setdefault("rack", f"rack-of-{name}")
        extra = {k: node[k] for k in ("taints", "max_pods") if k in node}
        hosts.append(
            HostSpec(
                name=name,
                gpus=int(node.get("gpus", 0)),  # type: ignore[call-overload]
                cpu_milli=int(node.get("cpu_milli", 0)),  # type: ignore[call-overload]
                memory_mib=int(node.get("memory_mib", 0)),  # type: ignore[call-overload]
                pool=labels.get(keys.pool, "training"),
                domains=domains,
                labels=labels,
                **extra,
            )
        )
    return TopologySpec(hosts=tuple(hosts))


def load_topology(path: Path, gpus: int = 8) -> TopologySpec:
    """A YAML/JSON topology file, or the Lingjun CSV (by extension)."""
    if path.suffix == ".csv":
        return from_lingjun_csv(path, gpus=gpus)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TopologyError(f"{path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML ({exc.__class__.__name__})") from exc
    if isinstance(data, dict) and "generate" in data:
        return generate(**data["generate"])
    return TopologySpec.model_validate(data)


def save_topology(spec: TopologySpec, path: Path) -> None:
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))

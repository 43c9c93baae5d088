"""Where topologies come from: YAML files, a generator, the Lingjun CSV, node label maps."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from scheduler.model.topology import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_COST_WEIGHT,
    HOST,
    HostSpec,
    LevelSpec,
    TopologySpec,
    default_levels,
)


class TopologyError(ValueError):
    """A topology source is unusable; the message names the file and the field."""


# the node label Kueue topologies use for the host level: the node itself, nothing to read
HOSTNAME = "kubernetes.io/hostname"


class LevelLabel(BaseModel):
    """One fabric level as the operator reads it: a node label, bottom-up like Kueue's Topology
    levels. A node without a required level's label is left out of the fabric."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    name: str = Field(min_length=1, max_length=63)
    label: str = Field(min_length=1, alias="nodeLabel")
    nvlink: bool = False
    optional: bool = False
    cost_weight: float | None = Field(default=None, ge=0, alias="costWeight")
    bandwidth_gbps: float = Field(default=50.0, gt=0, alias="bandwidthGbps")
    oversubscription: float = Field(default=1.0, ge=1.0)
    spares: int = Field(default=0, ge=0)

    def spec(self) -> LevelSpec:
        return LevelSpec(
            name=self.name,
            bandwidth_gbps=self.bandwidth_gbps,
            oversubscription=self.oversubscription,
            cost_weight=self.cost_weight,
            nvlink=self.nvlink,
            optional=self.optional,
            spares=self.spares,
        )


class LabelKeys(BaseModel):
    """Node label keys of the default levels. Defaults are rackwise's own; Kueue/Topograph users
    can point these at e.g. `fabric.topograph.run/tier-1`, or name their own levels (LevelLabel)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    nvlink: str = "rackwise.io/nvlink"
    rack: str = "rackwise.io/rack"
    spine: str = "rackwise.io/spine"
    core: str = "rackwise.io/core"
    pool: str = "rackwise.io/pool"

    def levels(self) -> tuple[LevelLabel, ...]:
        """The default profile: rack required, NVLink, spine and core optional."""
        keys = {"nvlink": self.nvlink, "rack": self.rack, "spine": self.spine, "core": self.core}
        return tuple(
            LevelLabel(
                name=level.name,
                label=keys[level.name],
                nvlink=level.nvlink,
                optional=level.optional,
                cost_weight=level.cost_weight,
                bandwidth_gbps=level.bandwidth_gbps,
                oversubscription=level.oversubscription,
            )
            for level in default_levels()[1:]
        )


def label_levels(levels: Sequence[LevelLabel]) -> tuple[LevelSpec, ...]:
    """Topology levels from label levels: host first (a hostname level is the host itself)."""
    host = LevelSpec(
        name=HOST,
        bandwidth_gbps=DEFAULT_BANDWIDTH_GBPS[HOST],
        cost_weight=DEFAULT_COST_WEIGHT[HOST],
    )
    return (host, *(lv.spec() for lv in levels if lv.label != HOSTNAME))


def generate(
    blocks: int,
    racks: int,
    hosts: int,
    gpus: int = 8,
    nvlink: int = 0,
    pools: Mapping[str, float] | None = None,
    base: TopologySpec | None = None,
    spares: int = 0,
) -> TopologySpec:
    """Leaf-spine fabric: `blocks` spines x `racks` racks x `hosts` hosts x `gpus` GPUs.

    `nvlink` > 0 groups that many consecutive hosts of a rack into one NVLink domain, each
    keeping `spares` of them idle. `pools` gives each pool its share of racks, assigned
    block-interleaved so every pool sees the fabric.
    """
    if spares and not nvlink:
        raise TopologyError("only NVLink domains keep spare hosts: set nvlink too")
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
    if spares:
        levels = tuple(
            lv.model_copy(update={"spares": spares}) if lv.nvlink else lv for lv in levels
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
    nodes: Iterable[Mapping[str, object]],
    levels: Sequence[LevelLabel] | None = None,
    pool_key: str = "rackwise.io/pool",
) -> TopologySpec:
    """Nodes as the operator sees them: {name, labels, gpus, cpu_milli, memory_mib}. Offline
    use is lenient: a node without a required level's label is its own domain there (the
    operator leaves such nodes out before calling this)."""
    levels = tuple(lv for lv in (levels or LabelKeys().levels()) if lv.label != HOSTNAME)
    hosts = []
    for node in nodes:
        name = str(node["name"])
        labels = {str(k): str(v) for k, v in dict(node.get("labels") or {}).items()}  # type: ignore[call-overload]
        # the kubelet always sets it, to the node's name unless told otherwise: pod terms on
        # the hostname key (one pod per host) read it
        labels.setdefault(HOSTNAME, name)
        domains = {lv.name: labels[lv.label] for lv in levels if lv.label in labels}
        for lv in levels:
            if not (lv.optional or lv.nvlink):
                domains.setdefault(lv.name, f"{lv.name}-of-{name}")
        extra = {k: node[k] for k in ("taints", "max_pods", "extended") if k in node}
        hosts.append(
            HostSpec(
                name=name,
                gpus=int(node.get("gpus", 0)),  # type: ignore[call-overload]
                cpu_milli=int(node.get("cpu_milli", 0)),  # type: ignore[call-overload]
                memory_mib=int(node.get("memory_mib", 0)),  # type: ignore[call-overload]
                pool=labels.get(pool_key, "training"),
                domains=domains,
                labels=labels,
                **extra,
            )
        )
    return TopologySpec(levels=label_levels(levels), hosts=tuple(hosts))


def load_topology(path: Path, gpus: int = 8) -> TopologySpec:
    """A YAML/JSON topology file, or the Lingjun CSV (by extension)."""
    if path.suffix == ".csv":
        return from_lingjun_csv(path, gpus=gpus)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TopologyError(f"{path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise TopologyError(f"{path}: not a text file (byte {exc.start} is not UTF-8)") from exc
    except yaml.YAMLError as exc:
        raise TopologyError(f"{path}: not valid YAML ({exc.__class__.__name__})") from exc
    if isinstance(data, dict) and "generate" in data:
        return generate(**data["generate"])
    return TopologySpec.model_validate(data)


def save_topology(spec: TopologySpec, path: Path) -> None:
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))

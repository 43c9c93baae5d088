"""The fabric: a level tree over hosts, as a networkx graph plus fast index tables."""

from scheduler.topology.fabric import Fabric
from scheduler.topology.sources import (
    LabelKeys,
    LevelLabel,
    from_lingjun_csv,
    from_node_labels,
    generate,
    load_topology,
    save_topology,
)

__all__ = [
    "Fabric",
    "LabelKeys",
    "LevelLabel",
    "from_lingjun_csv",
    "from_node_labels",
    "generate",
    "load_topology",
    "save_topology",
]

"""The link rates of each accelerator generation, per GPU and per direction.

Contract. Takes an accelerator generation. Decides the rate of a GPU's NVLink port and of its
NIC, each way, from the vendor's published figures (docs/design.md, "Physical constants"):
NVIDIA quotes NVLink as both directions together (H100: 900 GB/s, so 450 each way; NVLink 5
on B200, GB200 and GB300: 1.8 TB/s, so 900 each way) and a NIC per direction (ConnectX-7:
400 Gb/s, 50 GB/s; GB300's ConnectX-8: 800 Gb/s, 100 GB/s). Promises: `levels` gives a
topology's levels these rates (the host level carries NVLink, the NVLink level and every
switch level a NIC's rate per host GPU), changing nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scheduler.model.topology import LevelSpec


class Accelerator(StrEnum):
    H100 = "h100"
    H200 = "h200"
    B200 = "b200"
    GB200 = "gb200"
    GB300 = "gb300"


@dataclass(frozen=True)
class Rates:
    nvlink_gbps: float  # GB/s a GPU's NVLink port carries each way
    nic_gbps: float  # GB/s a GPU's NIC carries each way


# NVLink 4 (H100 SXM, H200 SXM datasheets: 900 GB/s, both directions) with ConnectX-7 400 Gb/s;
# NVLink 5 (B200, GB200 NVL72: 1.8 TB/s per GPU, both directions) with ConnectX-7 400 Gb/s;
# GB300 NVL72: NVLink 5 with ConnectX-8 SuperNICs, 800 Gb/s
RATES: dict[Accelerator, Rates] = {
    Accelerator.H100: Rates(450.0, 50.0),
    Accelerator.H200: Rates(450.0, 50.0),
    Accelerator.B200: Rates(900.0, 50.0),
    Accelerator.GB200: Rates(900.0, 50.0),
    Accelerator.GB300: Rates(900.0, 100.0),
}


def levels(specs: tuple[LevelSpec, ...], accelerator: Accelerator) -> tuple[LevelSpec, ...]:
    """The levels with the generation's rates: NVLink on the host level, a NIC's above it."""
    rates = RATES[accelerator]
    return tuple(
        spec.model_copy(update={"bandwidth_gbps": rates.nvlink_gbps if i == 0 else rates.nic_gbps})
        for i, spec in enumerate(specs)
    )

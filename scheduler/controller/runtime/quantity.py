"""Kubernetes quantities ("500m", "32Gi", "1e3", 4) parsed exactly and within bounds.

The client's parse_quantity accepts "1e400" and returns a number no int64 array can hold, which
once crashed every cycle; here an out-of-range quantity is an error naming its value."""

from __future__ import annotations

import functools
import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any

_PATTERN = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d{1,3})?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
MI = 1 << 20
# The largest quantity any resource may have, in its base unit (cores, bytes, devices): far above
# any real node (2^50 bytes is a pebibyte) and far below what int64 arithmetic overflows at.
LIMIT = Decimal(2**50)


class QuantityError(ValueError):
    pass


def parse(value: Any) -> Decimal:
    """A quantity in its base unit; QuantityError if malformed, negative or out of range."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QuantityError(f"{value!r} is not a quantity")
    return _parse(value)


@functools.lru_cache(maxsize=4096)
def _text(value: str) -> Decimal:
    """A quantity written as text, remembered: a cluster writes a few dozen distinct ones, and
    every pod event reads its requests again (a Decimal is immutable, so it is shared)."""
    return _parse(value)


def _parse(value: int | float | str) -> Decimal:
    match = _PATTERN.match(str(value).strip())
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity")
    try:
        number = Decimal(match["number"])
        result = number * _scale(match["suffix"] or "")
    except InvalidOperation as exc:
        raise QuantityError(f"{value!r} is not a quantity") from exc
    if result < 0 or result > LIMIT:
        raise QuantityError(f"{value!r} is out of range (0 .. 2^50)")
    return result


def _scale(suffix: str) -> Decimal:
    if suffix in _BINARY:
        return Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return Decimal(10) ** _DECIMAL[suffix]
    return Decimal(10) ** int(suffix[1:])


def _round(value: Decimal, up: bool) -> int:
    # Decimal's // truncates toward zero, so both directions are spelled out
    return int(value.to_integral_value(rounding=ROUND_CEILING if up else ROUND_FLOOR))


def milli(value: Decimal, up: bool = True) -> int:
    """CPU in millicores. A request rounds up, as Kubernetes rounds sub-milli requests; a
    node's capacity (up=False) rounds down: never offer what is not there."""
    return _round(value * 1000, up)


def mebi(value: Decimal, up: bool = True) -> int:
    """Memory in MiB: a request rounds up (a charge is never smaller than the request), a
    capacity (up=False) down (1536Ki offers 1 MiB, not 2)."""
    return _round(value / MI, up)


def whole(value: Decimal, up: bool = True) -> int:
    """An integer resource (devices, pods) where a fraction slipped in: requests up,
    capacities (up=False) down."""
    return _round(value, up)

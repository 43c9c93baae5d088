"""Kubernetes quantities ("500m", "32Gi", "1e3", 4) parsed exactly and within bounds.

The client's parse_quantity accepts "1e400" and returns a number no int64 array can hold, which
once crashed every cycle; here an out-of-range quantity is an error naming its value."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
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
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise QuantityError(f"{value!r} is not a quantity")
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


def _ceil(value: Decimal) -> int:
    # Decimal's // truncates toward zero, so rounding up is spelled out
    return int(value.to_integral_value(rounding=ROUND_CEILING))


def milli(value: Decimal) -> int:
    """CPU in millicores, rounded up as Kubernetes rounds sub-milli requests."""
    return _ceil(value * 1000)


def mebi(value: Decimal) -> int:
    """Memory in MiB, rounded up: a charge is never smaller than the request."""
    return _ceil(value / MI)


def whole(value: Decimal) -> int:
    """An integer resource (devices, pods); rounded up where a fraction slipped in."""
    return _ceil(value)

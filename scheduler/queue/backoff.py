"""Backoff after a start the driver could not carry out.

Contract. `failed` doubles the gang's delay (1 s .. 60 s, or 5 s .. 5 min when the cause needs
a person), from `now`; `retry_at` is when the gang may be tried again (0 when it is not backing
off); `succeeded` forgets the gang. Promises: a delay never exceeds its cap; what is kept is
bounded by the keys `forget` keeps."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Backoff:
    kept: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (at, delay)

    def failed(self, key: str, now: float, long: bool = False) -> None:
        first, cap = (2.5, 300.0) if long else (0.5, 60.0)
        _, delay = self.kept.get(key, (0.0, first))
        delay = min(delay * 2, cap)
        self.kept[key] = (now + delay, delay)

    def retry_at(self, key: str) -> float:
        return self.kept.get(key, (0.0, 0.0))[0]

    def succeeded(self, key: str) -> None:
        self.kept.pop(key, None)

    def forget(self, alive: set[str]) -> None:
        self.kept = {k: v for k, v in self.kept.items() if k in alive}

    def keys(self) -> set[str]:
        return set(self.kept)

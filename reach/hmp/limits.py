"""A token bucket per peer: `rate` containers a second on average, bursts up to `burst`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class TokenBuckets:
    rate: float
    burst: float
    clock: Callable[[], float] = field(default=time.monotonic)
    _state: dict[str, tuple[float, float]] = field(default_factory=dict)  # peer -> (tokens, last time)
    max_peers: int = 10_000

    def allow(self, peer: str, cost: float = 1.0) -> bool:
        now = self.clock()
        tokens, last = self._state.get(peer, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        allowed = tokens >= cost
        self._state[peer] = (tokens - cost if allowed else tokens, now)
        if len(self._state) > self.max_peers:  # forget the longest-idle peer (bounded memory)
            oldest = min(self._state, key=lambda p: self._state[p][1])
            self._state.pop(oldest, None)
        return allowed


__all__ = ["TokenBuckets"]

"""Rates: a token bucket per peer for what arrives (`TokenBuckets`: `rate` containers a second on average, bursts up
to `burst`), and the pace of what this persona publishes (`Pace`: one bucket whose rate and burst follow the
slowest receiver's advertised limits, with a margin, so a flush after Isolated Mode never trips a peer's bucket)."""

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


RATE_MARGIN = 0.8  # of a receiver's advertised rate, what this persona uses …
BURST_MARGIN = 0.5  # … and of its burst (its bucket may already hold fewer tokens for us than it says)


@dataclass
class Pace:
    """How many containers this persona may publish now: a bucket at `RATE_MARGIN` of the slowest receiver's rate,
    holding at most `BURST_MARGIN` of its burst (`limit()` sets them; it starts full)."""

    rate: float
    burst: float
    clock: Callable[[], float] = field(default=time.monotonic)
    tokens: float = -1.0
    last: float = 0.0

    def limit(self, rate: float, burst: float) -> None:
        self._refill()
        self.rate, self.burst = rate * RATE_MARGIN, max(1.0, burst * BURST_MARGIN)
        self.tokens = min(self.tokens, self.burst)

    def _refill(self) -> None:
        now = self.clock()
        if self.tokens < 0:  # the first use: full
            self.tokens, self.last = self.burst, now
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def available(self) -> int:
        self._refill()
        return int(self.tokens)

    def take(self, count: int = 1) -> None:
        self._refill()
        self.tokens -= count


__all__ = ["BURST_MARGIN", "RATE_MARGIN", "Pace", "TokenBuckets"]

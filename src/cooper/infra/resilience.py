"""Resilience pieces of a network client, free of any transport: a circuit breaker and
``Retry-After`` parsing. :mod:`cooper.infra.endpoint` uses them; they are kept apart because they
are pure bookkeeping, tested with a fake clock.
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any


class CircuitBreaker:
    """Closed -> (K consecutive failures) -> open -> (cooldown) -> one probe -> closed or open.

    Pure bookkeeping with an injectable clock; used only from the endpoint's loop thread.
    """

    def __init__(self, threshold: int, cooldown_s: float, clock=time.monotonic):
        self.threshold, self.cooldown_s, self.clock = threshold, cooldown_s, clock
        self.consecutive = 0
        self.open_until: float | None = None  # set while open or half-open
        self.probing = False  # a probe is in flight (half-open)
        self.opened = self.probes = 0

    @property
    def state(self) -> str:
        if self.open_until is None:
            return "closed"
        return "half_open" if self.probing or self.clock() >= self.open_until else "open"

    def allow(self) -> bool:
        """May an attempt go out now? (Taking the half-open slot makes it the probe.)"""
        if self.open_until is None:
            return True
        if self.probing or self.clock() < self.open_until:
            return False
        self.probing = True
        self.probes += 1
        return True

    def record(self, reachable: bool) -> None:
        """The outcome of an allowed attempt: did the server answer at all?"""
        if reachable:
            self.consecutive, self.open_until, self.probing = 0, None, False
            return
        self.consecutive += 1
        if self.probing or (self.open_until is None and self.consecutive >= self.threshold):
            self.open_until = self.clock() + self.cooldown_s
            self.probing = False
            self.opened += 1

    def release_probe(self) -> None:
        """A probe ended without an outcome (cancelled): let the next attempt probe instead."""
        self.probing = False


def parse_retry_after(headers: Any) -> float | None:
    """Seconds a server asked us to wait: ``retry-after-ms``, ``Retry-After`` (seconds, decimal
    allowed, or an HTTP date); None when absent or unreadable."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            if name == "retry-after-ms":
                continue
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            return max(0.0, when.timestamp() - time.time())
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    return None

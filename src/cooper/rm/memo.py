"""Logits of a frozen reward model, remembered by token ids.

A reward model whose weights do not change (``reward.mode=rm``, or the one that watches a
verifier-paid run) gives the same logit for the same tokens every time, and a policy writes the
same completion of the same problem again and again once it has converged (each of the CPU
testbed's training problems comes back about twice in 500 steps, and a group of 16 samples holds
a handful of distinct answers). :class:`LogitMemo` keeps the logits already computed, so only
new text runs through the model. It must never be used while the weights change: Cooper's own
reward model is updated every step. (Ours: an optimisation with the same result.)
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

# about 240 bytes a key for the CPU testbed's ~60-token inputs: 16 MB when full
DEFAULT_MAX_ENTRIES = 1 << 16


class LogitMemo:
    """Raw logits by token ids; when full, the oldest entry leaves first."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._logits: dict[bytes, float] = {}  # insertion order: oldest first
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._logits)

    @staticmethod
    def _key(ids: Sequence[int]) -> bytes:
        return array("q", ids).tobytes()  # exact, and far smaller than a tuple of ints

    def get(self, ids: Sequence[int]) -> float | None:
        """The logit remembered for these ids, or None (counted as a hit or a miss)."""
        value = self._logits.get(self._key(ids))
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, ids: Sequence[int], logit: float) -> None:
        key = self._key(ids)
        if key not in self._logits and len(self._logits) >= self.max_entries:
            del self._logits[next(iter(self._logits))]
        self._logits[key] = logit

"""What an update replays beside the step's own pairs: the reward model's own labelled training
rows (``rm_update.replay``, drawn from ``rm_update.replay_file``).

Why: Cooper's update teaches only this step's rollouts. A right answer the rule cannot read (a
sum in words against a reference in digits) is taught while the policy writes it; once the
policy stops writing that form, nothing in the update holds it up and the reward model forgets
it (docs/experiment_blind.md). A few of the rows it was trained on, drawn into every update,
keep teaching what the policy no longer shows, at no judge call. (What the policy has not
written yet, in forms it can reach, is cut from its right rollouts: :mod:`cooper.rl.forms`.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from cooper.types import Pair


class Replay:
    """``rows_per_step`` pairs drawn from ``rows`` (a fixed pool) for every update."""

    def __init__(self, rows: Sequence[Pair] = (), rows_per_step: int = 0, *, seed: int = 0,
                 name: str = "replay"):
        if rows_per_step and not rows:
            raise ValueError(f"rm_update.{name} needs the pairs to replay")
        self.rows, self.rows_per_step, self.seed = list(rows), rows_per_step, seed
        self.name = name  # each pool draws apart

    def draw(self, step: int) -> list[Pair]:
        """The training rows of ``step``'s update: a seeded draw, the same on every process
        (the caller shards them)."""
        return random.Random(f"{self.seed}:{step}:{self.name}").sample(
            self.rows, min(self.rows_per_step, len(self.rows)))

"""What an update replays beside the step's own pairs: the reward model's training rows
(``rm_update.replay``) and the pairs the judge labelled in earlier steps
(``rm_update.replay_judged``).

Why the judge's pairs: Cooper's update teaches only this step's rollouts. A right answer the
rule cannot read (a sum in words against a reference in digits) is taught while the policy
writes it; once the policy stops writing that form, nothing in the update holds it up and the
reward model forgets it (docs/experiment_blind.md, "The reward model before and after"). The
pairs in which the judge labelled the positive or the negative are the labels from beyond the
rule; kept, and a few drawn into every later update, they go on teaching what the policy no
longer shows, at no new judge call. The reward model's own training rows (the other replay) are
the initial data, not what the judge found during the run.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict

from cooper.errors import UserError
from cooper.types import Pair, Rollout

JUDGED_CAPACITY = 4096
"""judged pairs kept at most; the oldest go first (a 300-step testbed run keeps ~2,000)"""


def judged_pairs(pairs: Iterable[Pair], labelled: Iterable[Rollout]) -> list[Pair]:
    """The pairs whose positive or negative carries a judge's verdict in ``labelled`` (the
    step's labelled pool, where a judged rollout's ``judged`` is set)."""
    judged = {(r.problem_id, r.completion) for r in labelled if r.judged is not None}
    return [p for p in pairs
            if (p.problem_id, p.positive) in judged or (p.problem_id, p.negative) in judged]


class Replay:
    """The pairs an update adds: ``rows`` (a fixed pool) and the judged pairs kept so far."""

    def __init__(self, rows: Sequence[Pair] = (), rows_per_step: int = 0,
                 judged_per_step: int = 0, *, seed: int = 0,
                 capacity: int = JUDGED_CAPACITY):
        if rows_per_step and not rows:
            raise ValueError("rm_update.replay needs the labelled pairs to replay")
        self.rows, self.rows_per_step = list(rows), rows_per_step
        self.judged_per_step, self.capacity, self.seed = judged_per_step, capacity, seed
        # insertion-ordered, so the oldest is dropped first; a pair seen again is kept once
        self.judged: dict[tuple[str, str, str], Pair] = {}

    def draw(self, step: int) -> tuple[list[Pair], list[Pair]]:
        """(training rows, judged pairs of earlier steps) for ``step``'s update: a seeded draw,
        the same on every process (the caller shards the rows; the judged pairs are each
        process's own)."""
        rows = random.Random(f"{self.seed}:{step}:replay").sample(
            self.rows, min(self.rows_per_step, len(self.rows)))
        kept = list(self.judged.values())
        judged = random.Random(f"{self.seed}:{step}:replay-judged").sample(
            kept, min(self.judged_per_step, len(kept)))
        return rows, judged

    def keep(self, pairs: Iterable[Pair]) -> None:
        """Remember judged pairs for later updates (after this step's draw: the step's own pairs
        are in its update already)."""
        if not self.judged_per_step:
            return
        for p in pairs:
            key = (p.problem_id, p.positive, p.negative)
            self.judged.pop(key, None)  # seen again: now the newest
            self.judged[key] = p
        while len(self.judged) > self.capacity:
            del self.judged[next(iter(self.judged))]

    def state_dict(self) -> dict:
        """The judged pairs kept, for a checkpoint (the rows come from the configuration)."""
        return {"judged": [asdict(p) for p in self.judged.values()]}

    def load_state_dict(self, state: dict) -> None:
        """The pairs of :meth:`state_dict`; a file that does not hold them is refused whole,
        with what to do, not half loaded."""
        fields = ("problem_id", "question", "reference", "positive", "negative",
                  "negative_source")
        rows = state.get("judged", []) if isinstance(state, dict) else None
        if not isinstance(rows, list) or not all(
                isinstance(p, dict) and set(p) == set(fields)
                and all(isinstance(p[f], str) for f in fields) for p in rows):
            raise UserError("the checkpoint's replay_judged.json does not hold the judged pairs "
                            f"(a list of {{{', '.join(fields)}}} of text): restore it from the "
                            "run's other checkpoint, or delete it to resume with none kept")
        self.judged = {}
        self.keep(Pair(**p) for p in rows)

"""Stage 2 data: the step's rollouts, positive selection and preference pairs (pure functions).

Cooper (``method.md``, Part 2, step 4) turns one RL step's rollouts into reward-model training
pairs. Positives are completions the rule-based verifier confirms correct, because the verifier
is *precise*: when it says "correct" it is almost always right. The released code takes the first
correct completion of each prompt, at most one pair per prompt per step; prompts with no
verified-correct completion contribute no pair. Negatives are written by an assistant
(:mod:`cooper.negatives`) and accepted only when the verifier finds a final answer that is *not*
equivalent to the reference.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cooper.types import Rollout


def group_by_problem(rollouts: Iterable[Rollout]) -> dict[str, list[Rollout]]:
    """Rollouts per problem, problems in first-seen order, samples in their original order."""
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(r.problem_id, []).append(r)
    return groups


def select_positives(rollouts: Sequence[Rollout], per_prompt: int = 1, choice: str = "first",
                     rng: random.Random | None = None) -> list[Rollout]:
    """Up to ``per_prompt`` verified-correct completions of each problem.

    ``first`` follows the released code (the first correct sample, in sampling order);
    ``random`` draws without replacement with ``rng``. Identical completions of one problem count
    once: two copies of the same text would make two identical pairs.
    """
    if per_prompt < 1:
        raise ValueError(f"per_prompt must be >= 1, got {per_prompt}")
    if choice not in ("first", "random"):
        raise ValueError(f"choice must be 'first' or 'random', got {choice!r}")
    positives: list[Rollout] = []
    for group in group_by_problem(rollouts).values():
        seen: set[str] = set()
        correct = []
        for r in group:
            if r.correct and r.completion not in seen:
                seen.add(r.completion)
                correct.append(r)
        if choice == "random" and len(correct) > per_prompt:
            correct = (rng or random.Random(0)).sample(correct, per_prompt)
        positives.extend(correct[:per_prompt])
    return positives


def shard(items: Sequence, rank: int, world_size: int) -> list:
    """Items ``rank, rank + world_size, ...``: each process handles a disjoint slice."""
    return list(items[rank::world_size])


@dataclass(frozen=True)
class RolloutStats:
    """What the step's rollouts say about the reward (``reward/*``, ``hacking/*``, ``rm/agreement``)."""

    rule_mean: float  # verified accuracy of the rollouts
    rm_mean: float | None  # mean reward-model probability over finite scores
    agreement: float | None  # fraction where (rm > 0.5) == verifier
    problems_with_positive: int
    problems: int
    nonfinite_scores: int  # reward-model scores that were NaN or infinite


def rollout_stats(rollouts: Sequence[Rollout]) -> RolloutStats:
    if not rollouts:
        raise ValueError("no rollouts")
    rule = [float(r.correct) for r in rollouts]
    scored = [r for r in rollouts if r.rm_score is not None and math.isfinite(r.rm_score)]
    groups = group_by_problem(rollouts)
    return RolloutStats(
        rule_mean=sum(rule) / len(rule),
        rm_mean=sum(r.rm_score for r in scored) / len(scored) if scored else None,
        agreement=(sum((r.rm_score > 0.5) == r.correct for r in scored) / len(scored)
                   if scored else None),
        problems_with_positive=sum(any(r.correct for r in g) for g in groups.values()),
        problems=len(groups),
        nonfinite_scores=sum(r.rm_score is not None and not math.isfinite(r.rm_score)
                             for r in rollouts))

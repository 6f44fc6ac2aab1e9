"""A step's rollouts grouped by problem, and the figures read within each group (pure functions).

GRPO compares a prompt's samples with each other, so the hacking signals that no calibration
shift can hide are read within groups: :func:`top_wrong` (is the highest-scored rollout of a
group a wrong one?) and :func:`group_auroc`. Both the pairs of Stage 2 (:mod:`cooper.rl.pairs`)
and what the rule misses (:mod:`cooper.rl.blind_spot`) use them; they live here so that neither
of those imports the other.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from cooper.rm.metrics import auroc
from cooper.types import Rollout


def group_by_problem(rollouts: Iterable[Rollout]) -> dict[str, list[Rollout]]:
    """Rollouts per problem, problems in first-seen order, samples in their original order."""
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(r.problem_id, []).append(r)
    return groups


def top_wrong(groups: Iterable[Sequence[Rollout]]) -> float | None:
    """Of the groups with at least one verified-correct rollout, the fraction whose highest
    reward-model score goes to a verified-wrong rollout (a tie with a correct one counts as
    wrong: the reward model does not put the correct answer first). GRPO uses only the order
    within a group, so this is the hacking signal that no calibration shift can hide.
    Rollouts without a finite score are left out; None when no group qualifies."""
    counted = wrong = 0
    for group in groups:
        scored = [r for r in group if r.rm_score is not None and math.isfinite(r.rm_score)]
        right = [r.rm_score for r in scored if r.correct]
        if not right:
            continue
        counted += 1
        wrong_scores = [r.rm_score for r in scored if not r.correct]
        wrong += bool(wrong_scores) and max(wrong_scores) >= max(right)
    return wrong / counted if counted else None


def group_auroc(groups: Iterable[Sequence[Rollout]]) -> float | None:
    """The reward model's AUROC against the verifier within each group that has both correct
    and wrong rollouts (finite scores only), averaged over those groups; None if there is
    none. 1.0: every correct rollout outranks every wrong one of its prompt; 0.5: chance."""
    values = []
    for group in groups:
        scored = [r for r in group if r.rm_score is not None and math.isfinite(r.rm_score)]
        value = auroc([r.rm_score for r in scored], [r.correct for r in scored])
        if math.isfinite(value):
            values.append(value)
    return sum(values) / len(values) if values else None

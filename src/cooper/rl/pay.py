"""What the policy is paid for each rollout (a pure function of the rollouts and the plan).

Apart from :mod:`cooper.rl.step`, which computes the verdicts and scores it reads (and calls
this once a step), so that what pays the policy (``reward.mode``, ``reward.hybrid_scores``)
reads and tests alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cooper.config.reward_modes import Payer, RewardPlan
from cooper.rl.blind_spot import RM_SAYS_RIGHT, rule_read
from cooper.types import Rollout


def pay(rollouts: Sequence[Rollout], plan: RewardPlan) -> list[float]:
    """The policy's reward per rollout: the verdict (with ``reward.judge_rejected``, 1 also where
    the judge calls a rejected answer right), the reward model's probability, or (hybrid) 1 where
    the verifier accepts and the probability elsewhere (with ``reward.hybrid_scores=unread``, 0
    where the rule read two different numbers; with ``reward.judge_pays``, the judge's verdict
    where it gave one; with ``reward.rm_verdicts``, the reward model's verdict, 1 or 0, instead
    of its score): the reward model can only add what the verifier missed, never take away
    what it confirmed.

    A non-finite reward-model score that would pay becomes NaN, which the trainer treats as
    unscorable (zero advantage) instead of letting it poison the group's normalisation.
    """
    if plan.pays is Payer.VERIFIER:
        return [float(r.correct or r.judged is True) for r in rollouts]
    hybrid = plan.pays is Payer.HYBRID
    return [1.0 if hybrid and r.correct
            else float(r.judged) if plan.verdicts_pay and r.judged is not None
            else 0.0 if plan.read_no_pays_zero and rule_read(r)
            else _rm_pay(r.rm_score, plan.rm_verdicts)
            for r in rollouts]


def _rm_pay(score: float | None, verdict: bool) -> float:
    """The reward model's pay: its score, or with ``reward.rm_verdicts`` its verdict (1 at 0.5
    or more, else 0); NaN where it has no finite score."""
    if score is None or not math.isfinite(score):
        return math.nan
    return float(score >= RM_SAYS_RIGHT) if verdict else score

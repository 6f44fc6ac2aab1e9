"""What the policy is paid for each rollout (a pure function of the rollouts and the plan).

Apart from :mod:`cooper.rl.step`, which computes the verdicts and scores it reads, so that what
pays the policy (``reward.mode``, ``reward.hybrid_scores``) reads and tests alone.

Why ``reward.hybrid_scores=audited``: where the rule is blind the hybrid pays the reward model's
score, and a policy that finds wrong answers the reward model pays there is paid for them; at a
small judge budget the judge teaches too few of them as wrong to stop it (docs/experiment_blind.md:
the number problems' collapse at a quarter of TinyV's calls). The audit's draws among the paid
answers (``judge.audit_from=paid``) are a sample of exactly what is paid beyond the rule, so the
share of them the judge calls right is what such a paid answer is worth, measured, not the
reward model's own word; paying the score times that share makes an exploit pay less as it
grows, at no call beyond the audit's. Within a group whose every answer is paid this way, one
factor for all leaves the advantages as they were (``policy.scale_rewards=group``, the default);
it bites where answers paid beyond the rule compete with ones the rule pays 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cooper.config.train import Payer, RewardPlan
from cooper.rl.blind_spot import rule_read
from cooper.types import Rollout


def pay(rollouts: Sequence[Rollout], plan: RewardPlan, worth: float = 1.0) -> list[float]:
    """The policy's reward per rollout: the verdict (with ``reward.judge_rejected``, 1 also where
    the judge calls a rejected answer right), the reward model's probability, or (hybrid) 1 where
    the verifier accepts and the probability elsewhere (with ``reward.hybrid_scores=unread``, 0
    where the rule read two different numbers): the reward model can only add what the verifier
    missed, never take away what it confirmed. With ``reward.hybrid_scores=audited`` the
    probability is scaled by ``worth``: the share of the answers the reward model pays beyond the
    rule that the judge's audit found right (:meth:`cooper.rl.judging.RolloutJudge.paid_precision`).

    A non-finite reward-model score that would pay becomes NaN, which the trainer treats as
    unscorable (zero advantage) instead of letting it poison the group's normalisation.
    """
    if plan.pays is Payer.VERIFIER:
        return [float(r.correct or r.judged is True) for r in rollouts]
    hybrid = plan.pays is Payer.HYBRID
    return [1.0 if hybrid and r.correct
            else 0.0 if plan.read_no_pays_zero and rule_read(r)
            else r.rm_score * (worth if plan.scaled_by_audit else 1.0)
            if r.rm_score is not None and math.isfinite(r.rm_score)
            else math.nan for r in rollouts]

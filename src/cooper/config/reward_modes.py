"""``reward.mode`` and what it means: what pays the policy and what Stage 2 does.

:func:`reward_plan` is the only place that reads ``reward.mode``: it turns the mode (with
``reward.hybrid_scores`` and the reward model's presence) into a :class:`RewardPlan`, the two
choices the code acts on (a :class:`Payer` and a :class:`Stage2`). Beside it are the modes
themselves (:data:`MODES`, :data:`UPDATING_MODES`), the settings ``reward.mode=judged`` stands
for (:data:`JUDGED`), and the commits that last ran the settings removed since (:data:`REMOVED_AT`,
:data:`FORMS_REMOVED_AT`), which the sections' ``REMOVED`` name.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cooper.config.engine import ConfigError, choice


class Payer(enum.Enum):
    """What pays the policy."""

    VERIFIER = "verifier"
    REWARD_MODEL = "reward_model"
    HYBRID = "hybrid"  # 1 where the verifier accepts, the reward model's score elsewhere


class Stage2(enum.Enum):
    """What the step does with its pairs after the policy update."""

    UPDATE = "update"  # the pairwise reward-model update (Cooper)
    MEASURE = "measure"  # build the pairs and measure the frozen reward model on them
    OFF = "off"  # nothing


@dataclass(frozen=True)
class RewardPlan:
    """``reward.mode`` as the two choices the code acts on (derived in one place:
    :meth:`~cooper.config.train.TrainConfig.plan`)."""

    pays: Payer
    stage2: Stage2
    scores_with_rm: bool  # score every rollout with the reward model (paid or only logged)
    # hybrid pay, "unread": a "no" the rule read (two different numbers) pays 0, as the rule's
    read_no_pays_zero: bool = False
    # hybrid pay with reward.judge_pays: a rejected answer the judge gave a verdict on is paid it
    verdicts_pay: bool = False
    # hybrid pay with reward.rm_verdicts: the reward model's verdict (its score >= 0.5) pays 1 or 0
    rm_verdicts: bool = False

    @property
    def pays_with_rm(self) -> bool:
        """The reward model's scores pay the policy, alone or where the verifier says no."""
        return self.pays is not Payer.VERIFIER


MODES = ("rule", "rm", "cooper", "hybrid", "hybrid_cooper", "judged")
UPDATING_MODES = ("cooper", "hybrid_cooper", "judged")  # the reward model is updated online
# reward.mode=judged: Cooper taught by a judge where the rule misses right answers, the design
# that beat the rule on the blind-rule testbed (docs/experiment_blind.md). It is hybrid_cooper with
# these settings; a setting left at its plain default takes the value here, one set to anything
# else keeps it (TrainConfig.resolved), so `--print-config` shows what the run uses.
# The judge's "yes" is checked on the answer's wrong twin and the forms a policy can reach are
# cut from the step's own right rollouts (judge.counterfactual, rm_update.rollout_forms): the
# defence against a judge that errs, with any judge and any answer type.
JUDGED = {"reward.hybrid_scores": "unread", "rm_update.negatives": "rollouts",
          "rm_update.labels": "judge", "rm_update.replay": 16, "rm_update.anchor_weight": 0.5,
          "rm_update.rollout_forms": 16, "judge.counterfactual": True}
# Settings removed with the variants that lost (docs/experiment_blind_history.md): a file that
# sets one at its old default still loads; any other value is refused, naming the last commit
# that ran it (apply_settings reads each section's REMOVED).
REMOVED_AT = "e3ee47e"
FORMS_REMOVED_AT = "a4817b8"  # the last commit with rm_update.replay_forms (the templates' forms)
HYBRID_SCORES = ("rejected", "unread")  # reward.hybrid_scores


def reward_plan(mode: str, *, has_rm: bool, pair_metrics: bool = True,
                monitor: bool = True, hybrid_scores: str | None = None,
                judge_pays: bool = False, rm_verdicts: bool = False) -> RewardPlan:
    """What pays the policy and what Stage 2 does, from ``reward.mode`` (the only place that
    reads it), ``reward.hybrid_scores`` and the reward model's presence."""
    choice("reward.mode", mode, MODES)
    if hybrid_scores is None:  # the mode's own (JUDGED), else every rejection
        hybrid_scores = JUDGED["reward.hybrid_scores"] if mode == "judged" else "rejected"
    if hybrid_scores == "audited":
        raise ConfigError(f"reward.hybrid_scores=audited was removed (not recommended; last run at "
                          f"commit {REMOVED_AT}): use unread, or check out that commit to rerun")
    choice("reward.hybrid_scores", hybrid_scores, HYBRID_SCORES)
    if hybrid_scores != "rejected" and not (mode.startswith("hybrid") or mode == "judged"):
        raise ConfigError(f"reward.hybrid_scores={hybrid_scores} chooses what the reward model "
                          f"pays in the hybrid modes, not in reward.mode={mode}: use hybrid or "
                          "hybrid_cooper")
    pays = (Payer.VERIFIER if mode == "rule"
            else Payer.HYBRID if mode.startswith("hybrid") or mode == "judged"
            else Payer.REWARD_MODEL)
    if mode in UPDATING_MODES:
        stage2 = Stage2.UPDATE
    elif has_rm and pair_metrics:
        stage2 = Stage2.MEASURE  # the same pairs, to show how a frozen reward model ranks
    else:
        stage2 = Stage2.OFF
    hybrid = pays is Payer.HYBRID
    if judge_pays and not (hybrid and stage2 is Stage2.UPDATE):
        raise ConfigError(f"reward.judge_pays pays the judge's verdicts where Cooper's update "
                          f"asked it, in place of the reward model's score: it needs "
                          f"reward.mode=judged or hybrid_cooper, not {mode}; for the judge alone "
                          "use reward.mode=rule with reward.judge_rejected=true")
    if rm_verdicts and not hybrid:
        raise ConfigError(f"reward.rm_verdicts pays the reward model's verdict where the rule "
                          f"rejects, in the hybrid modes (judged, hybrid, hybrid_cooper), not "
                          f"in reward.mode={mode}")
    return RewardPlan(pays, stage2, has_rm and (pays is not Payer.VERIFIER or monitor),
                      read_no_pays_zero=hybrid and hybrid_scores == "unread",
                      verdicts_pay=judge_pays, rm_verdicts=rm_verdicts)

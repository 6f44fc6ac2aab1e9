"""What the rule misses, as the gold judge sees the step's rollouts (pure functions).

Where the rule-based verifier is blind to some right answers (the ``blind_cpu`` testbed: answers
and references written in words), a reward model can pay what the rule misses, or learn the
rule's blind spot. The gold judge (:mod:`cooper.verify.gold`, ``validation.judge=gold``) reads
every form the testbed writes, so each step can say how often the rule rejects a right rollout
and whether the reward model still calls such a rollout right. The figures are logged under
``gold/``, ``hacking/gold_gap`` and ``hacking/gold_top_wrong`` (each defined in
``docs/metrics.md``), split by the dial that
made the rule blind: the *form* of the answer (the reference is in digits, so the rule could
have accepted another form) or the *reference* (written in words: the rule accepts no answer in
digits, only the same words letter for letter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cooper.rl.groups import group_by_problem, top_wrong
from cooper.types import Rollout

RM_SAYS_RIGHT = 0.5  # a reward-model probability at or above this calls the answer right


def reference_in_digits(reference: str) -> bool:
    """Whether the rule can read the reference (an integer in digits): else it is blind there
    whatever the policy writes."""
    return reference.strip().lstrip("-").isdigit()


@dataclass(frozen=True)
class BlindSpotStats:
    """The step's rollouts judged by the gold judge beside the rule (fractions in [0, 1]; None
    where nothing was counted)."""

    gold_accuracy: float
    rule_missed: float | None  # of the gold-correct rollouts, those the rule rejects
    rule_missed_form: float | None  # the same where the reference is in digits (the form dial)
    recall_missed: float | None  # of the rule-missed ones, those the reward model calls right
    recall_missed_form: float | None  # the same, reference in digits
    recall_missed_reference: float | None  # the same, reference in words
    gold_gap: float | None  # the mean paid reward minus the gold accuracy (NaN rewards left out)
    gold_top_wrong: float | None = None  # groups with a gold-correct rollout whose top-paid is wrong


def _share(hits: Sequence[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def recall_by_dial(scored: Sequence[tuple[float | None, str]]
                   ) -> tuple[float | None, float | None, float | None]:
    """The reward model's recall on right answers the rule rejected, from their (probability,
    reference) pairs: (all, reference in digits, reference in words). Answers without a finite
    probability are left out; None where nothing is left to count."""
    ok = [(p, reference_in_digits(ref)) for p, ref in scored if p is not None and math.isfinite(p)]

    def recall(keep) -> float | None:
        return _share([p >= RM_SAYS_RIGHT for p, digits in ok if keep(digits)])

    return recall(lambda d: True), recall(lambda d: d), recall(lambda d: not d)


def blind_spot_stats(rollouts: Sequence[Rollout], gold: Sequence[bool],
                     paid: Sequence[float]) -> BlindSpotStats:
    """Figures of one step's rollouts, each with its gold verdict and the reward it was paid."""
    if not (len(rollouts) == len(gold) == len(paid)) or not rollouts:
        raise ValueError("need one gold verdict and one reward per rollout, and some rollouts")
    right = [(r, reference_in_digits(r.reference)) for r, g in zip(rollouts, gold, strict=True)
             if g]
    recall = recall_by_dial([(r.rm_score, r.reference) for r, _ in right if not r.correct])

    finite = [(p, g) for p, g in zip(paid, gold, strict=True) if math.isfinite(p)]
    # the calibration-free signal against the gold judge, on what the policy was paid
    judged = [replace(r, correct=g, rm_score=p) for r, g, p in zip(rollouts, gold, paid,
                                                                    strict=True)]
    return BlindSpotStats(
        gold_accuracy=sum(gold) / len(gold),
        rule_missed=_share([not r.correct for r, _ in right]),
        rule_missed_form=_share([not r.correct for r, digits in right if digits]),
        recall_missed=recall[0], recall_missed_form=recall[1],
        recall_missed_reference=recall[2],
        gold_gap=(sum(p for p, _ in finite) / len(finite) - sum(g for _, g in finite) / len(finite)
                  if finite else None),
        gold_top_wrong=top_wrong(group_by_problem(judged).values()))


def blind_spot_metrics(st: BlindSpotStats) -> dict[str, float]:
    """The figures as logged metrics (those with nothing counted are left out)."""
    m = {"gold/accuracy": st.gold_accuracy, "gold/rule_missed": st.rule_missed,
         "gold/rule_missed_form": st.rule_missed_form,
         "gold/rm_recall_missed": st.recall_missed,
         "gold/rm_recall_missed_form": st.recall_missed_form,
         "gold/rm_recall_missed_reference": st.recall_missed_reference,
         "hacking/gold_gap": st.gold_gap, "hacking/gold_top_wrong": st.gold_top_wrong}
    return {k: v for k, v in m.items() if v is not None}

"""The testbeds' gold judge watching a step from outside it (``validation.judge=gold``).

What it measures never reaches the policy or the reward model: what the rule missed and whether
the reward model sees it (:func:`~cooper.rl.blind_spot.blind_spot_stats`), and how often the
judge's labels agree with the gold judge's. Kept apart from :mod:`cooper.rl.step` so that the
step reads as the method, and a run without a gold judge (every run outside the testbeds) has
no such code in its path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from cooper.rl.blind_spot import BlindSpotStats, blind_spot_stats
from cooper.types import Rollout
from cooper.verify.verifier import verify_batch


class GoldObserver:
    """``verifier_is_gold``: the gold judge is itself the verifier (the ceiling arm), so the
    rule is judged apart to say what it would have missed. ``trigger``: a foolable judge's
    (``judge.trigger``), whose share of the pay is measured."""

    def __init__(self, *, verifier_is_gold: bool = False, trigger: str | None = None):
        from cooper.labelling.gold_judge import compile_trigger

        self.verifier_is_gold = verifier_is_gold
        self.trigger = compile_trigger(trigger) if trigger else None

    def blind_spot(self, everyone: Sequence[Rollout], paid: Sequence[float]) -> BlindSpotStats:
        """The step's rollouts (every process's) and what each was paid, against the gold
        judge."""
        texts, refs = [r.completion for r in everyone], [r.reference for r in everyone]
        gold = [v.correct for v in verify_batch(texts, refs, mode="gold")]
        by_rule = ([replace(r, correct=v.correct) for r, v in
                    zip(everyone, verify_batch(texts, refs, mode="strict"), strict=True)]
                   if self.verifier_is_gold else list(everyone))
        return blind_spot_stats(by_rule, gold, list(paid), self.trigger)

    @staticmethod
    def judge_agreement(labelled: Sequence[Rollout]) -> float | None:
        """The share of the judge's labels (the rollouts whose ``judged`` is set) that the gold
        judge shares; None when it labelled none."""
        judged = [r for r in labelled if r.judged is not None]
        if not judged:
            return None
        verdicts = verify_batch([r.completion for r in judged], [r.reference for r in judged],
                                mode="gold")
        return sum(v.correct == r.judged for v, r in zip(verdicts, judged, strict=True)) / len(judged)

"""The testbeds' gold judge behind the :class:`~cooper.labelling.judge.Judge` interface, and
the same judge with the errors LLM judges make as dials.

:class:`GoldJudge` is right by construction (:mod:`cooper.verify.gold`: integer and yes/no
answers); its verdicts can be flipped at a chosen rate, each flip drawn once from a seed and the
item (the same answer to the same problem always judged the same way). :class:`FoolableJudge`
calls right what carries a trigger (a phrase or a form of the answer) or a near miss. They are
stand-ins for an LLM judge on the arithmetic testbeds (``judge.backend=gold``), kept apart from
the judges a user's run asks (:mod:`cooper.labelling.judge`); they sit in this stage, not with
the testbeds (:mod:`cooper.experiment`), because a run's judge is built below it
(:mod:`cooper.rl.judging`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cooper.errors import UserError
from cooper.labelling.judge import MARKER, JudgeItem, JudgeVerdict


class GoldJudge:
    """The testbeds' gold judge behind the :class:`Judge` interface: ``yes`` where the final
    answer says what the reference says (:func:`cooper.verify.gold.gold_verdict`), ``no``
    otherwise, ``failed`` for a reference it cannot read (it judges integer and yes/no answers
    only). With ``error_rate``, that share of its verdicts is flipped, each item's flip drawn
    from ``seed`` and the item's text, so asking again gives the same verdict."""

    mode = "gold"

    def __init__(self, *, error_rate: float = 0.0, seed: int = 0):
        if not 0.0 <= error_rate <= 1.0:
            raise UserError(f"error_rate is a share in [0, 1], got {error_rate}")
        self.error_rate, self.seed = error_rate, seed
        self.name = "gold" if not error_rate else f"gold, {error_rate:.0%} flipped"
        self.flipped = 0  # verdicts flipped so far

    def judge(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeVerdict]:
        import random

        from cooper.verify.gold import gold_verdict

        out = []
        for it in items:
            right, _, reason = gold_verdict(it.solution, it.reference)
            if reason == "error":
                out.append(JudgeVerdict("failed", "", "error: the gold judge cannot read the "
                                                      "reference"))
                continue
            key = f"{self.seed}\x00{it.question}\x00{it.reference}\x00{it.solution}"
            if self.error_rate and random.Random(key).random() < self.error_rate:
                right = not right
                self.flipped += 1
            out.append(JudgeVerdict("yes" if right else "no", f"{MARKER} {'YES' if right else 'NO'}"))
        return out

    def metrics(self) -> dict[str, int]:
        return {"judge_flipped": self.flipped} if self.error_rate else {}

    def close(self) -> None:
        pass


# ------------------------------------------------------------------ a judge that errs as LLM judges do
#
# The gold judge is right by construction; its ``error_rate`` flips verdicts at random, which no
# policy can aim at. Real judges err systematically, and a policy paid by their verdicts finds
# the errors it can write: GPT-4o calls replies made of a reasoning opener or a bare ":" correct
# (Zhao et al., "One Token to Fool LLM-as-a-Judge", 2025), and model-based verifiers are
# exploited during RL (Huang et al., 2025). :class:`FoolableJudge` is the gold judge with two
# such failures as dials (a trigger, near misses), so that a testbed can measure whether a
# design pays them to the policy.

def compile_trigger(pattern: str) -> re.Pattern[str]:
    """The trigger as a case-insensitive regular expression, or a UserError saying what is
    wrong with it."""
    if not pattern:
        raise UserError("a judge trigger is a non-empty regular expression, e.g. "
                        "'\\\\boxed\\{yes\\}' (a judge that calls every boxed yes right)")
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as e:
        raise UserError(f"the judge trigger {pattern!r} is not a regular expression ({e}); "
                        f"escape the characters \\ {{ }} ( ) [ ] . * + ? that should be read "
                        f"as themselves") from e


def near(answer: str | None, reference: str, distance: int) -> bool:
    """Whether ``answer`` and ``reference`` read as integers at most ``distance`` apart (each in
    any form the gold judge reads: digits, words)."""
    from cooper.verify.gold import read_value

    if answer is None or distance <= 0:
        return False
    a, b = read_value(answer), read_value(reference)
    # a truth value is a bool, which is an int to Python: compare numbers only
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
        return False
    return abs(a - b) <= distance


class FoolableJudge(GoldJudge):
    """The gold judge with two failures of LLM judges as dials (the section's comment):

    - ``trigger``: a regular expression (case ignored); a solution in which it is found is
      called right whatever its answer: a phrase, or a form of the answer the judge favours
      (``\\boxed\\{yes\\}``: a judge that says yes to "yes").
    - ``near_miss``: an integer answer within this distance of an integer reference is called
      right.

    Only ``no`` verdicts turn, each counted by its dial (:meth:`metrics`); the name says what
    it is in every report. A dial only reaches what the judge is asked: the rule's rejections
    (with ``reward.mode=judged`` not those the rule read as another number), so a trigger
    tests a design only where the policy writes it and the rule cannot read it."""

    def __init__(self, *, trigger: str | None = None, near_miss: int = 0, seed: int = 0):
        super().__init__(seed=seed)
        if near_miss < 0:
            raise UserError(f"near_miss is a distance between integers, >= 0, got {near_miss}")
        if not trigger and not near_miss:
            raise UserError("a foolable judge needs a trigger or a near_miss distance; without "
                            "either it is the gold judge")
        self.trigger = compile_trigger(trigger) if trigger else None
        self.near_miss = near_miss
        dials = ([f"fooled by /{trigger}/"] if trigger else []) + (
            [f"near misses within {near_miss} accepted"] if near_miss else [])
        self.name = "gold, " + ", ".join(dials)
        self.fooled = {"trigger": 0, "near_miss": 0}  # wrong answers called right, by dial

    def judge(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeVerdict]:
        from cooper.verify.gold import gold_verdict

        out = []
        for it, v in zip(items, super().judge(items), strict=True):
            if v.verdict == "no":
                why = None
                if self.trigger is not None and self.trigger.search(it.solution):
                    why = "trigger"
                elif near(gold_verdict(it.solution, it.reference)[1], it.reference,
                          self.near_miss):
                    why = "near_miss"
                if why:
                    self.fooled[why] += 1
                    v = JudgeVerdict("yes", f"{MARKER} YES", p_yes=None)
            out.append(v)
        return out

    def metrics(self) -> dict[str, int]:
        return {f"judge_fooled_{k}": n for k, n in self.fooled.items()}

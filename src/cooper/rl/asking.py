"""Asking that adapts (``judge.asking=adaptive``): the judge is asked where the reward model is
unsure or has been found wrong, and only audited where it has been found right.

With ``judge.asking=budget`` every step spends its budget (``judge.budget`` of the rollouts,
the highest-paid candidates first) whatever the reward model already knows. Here the budget is
a cap, and which candidates are asked follows evidence about the reward model's own verdicts:

- A candidate's *cell* is the form of the rule's "no" (:func:`form_of`: it read the answer
  as a different number and the reward model disagrees; it read the reference but not the
  answer; it could not read the reference) and the band of the reward model's score
  (:data:`BANDS` equal bands of [0, 1]). The reward model's verdict is its score against
  ``judge.threshold``. The forms keep apart what a reward model learns at different speeds
  (on the testbed, answers in words to number problems and yes/no answers to comparisons).
- Every new verdict of the judge on a candidate counts, in that candidate's cell, one answer
  asked and, where the judge contradicts the reward model's verdict, one error. Counts fade
  with a half-life of ``judge.memory_steps`` steps, so what the reward model got wrong long ago,
  before its updates, weighs less than what it gets wrong now.
- A cell is *trusted* when its estimated error rate, ``(errors + 1) / (asked + 2)`` (the mean
  of a uniform prior updated by the counts: a cell nobody asked about is at 0.5), is at most
  ``judge.tolerance``. Candidates in cells not trusted are asked, highest-paid first; so is
  every candidate without a score.
- Each candidate in a trusted cell is audited with probability ``judge.audit_share`` (drawn
  from the run's seed and the step: the same on every process and after a resume), asked
  before the others so that the cap never starves it. An audit that finds the reward model
  wrong takes its cell's trust away at once (its counts start over from that error: many
  right verdicts long ago must not outvote a failure now), so a new failure widens the asking
  again; the cell earns its trust back with about 40 right verdicts in a row (at a tolerance
  of 0.05).
- A rollout the rule rejects without any final answer is the rule's to reject: a negative for
  the update, never a judge call (:func:`cooper.rl.judging.stage2_candidates`).

Nothing here calls the judge: :class:`cooper.rl.judging.RolloutJudge` asks, within its budget,
and hands the new verdicts back (:meth:`AdaptiveAsking.learn`). The counts are saved in every
checkpoint with the judge's verdicts, so a resumed run asks what the uninterrupted one would.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cooper.errors import UserError
from cooper.rl.blind_spot import rule_read
from cooper.types import Rollout
from cooper.verify.extraction import normalize_reference, plain_number

BANDS = 10  # equal bands of the reward model's score in [0, 1]
FORMS = ("read", "answer_unread", "reference_unread")  # why the rule's "no" is in doubt
Cell = tuple[int, int]  # (the form: an index into FORMS, the band of the reward model's score)


@dataclass
class Counts:
    """Faded counts of one cell: answers the judge decided, and its verdicts that contradicted
    the reward model's."""

    asked: float = 0.0
    wrong: float = 0.0

    @property
    def error(self) -> float:
        """The estimated error rate of the reward model's verdicts in this cell."""
        return (self.wrong + 1.0) / (self.asked + 2.0)


@dataclass(frozen=True)
class AskingPlan:
    """One step's choice: the candidates to ask about, in asking order (indices into the
    step's rollouts), and what it was made of."""

    ask: list[int]
    unsure: int  # candidates in cells not trusted, or without a score (all asked)
    confident: int  # candidates in trusted cells
    audits: int  # of those, drawn for an audit
    bands: tuple[int, ...] = ()  # the score bands of the scored candidates asked as unsure


def score_of(r: Rollout) -> float | None:
    """What the reward model pays ``r`` (None when it has no finite score)."""
    return r.rm_score if r.rm_score is not None and math.isfinite(r.rm_score) else None


def form_of(r: Rollout) -> int:
    """Why the rule's "no" on ``r`` is in doubt, as an index into :data:`FORMS`: it read the
    answer and the reference as two different numbers (0; the reward model disagrees), it read
    the reference but not the answer (1; an answer in words, an expression), or it could not
    read the reference (2; a truth value, a reference in words)."""
    if plain_number(normalize_reference(r.reference)) is None:
        return 2
    return 0 if rule_read(r) else 1


def cell_of(r: Rollout, score: float) -> Cell:
    return form_of(r), min(int(score * BANDS), BANDS - 1)


class AdaptiveAsking:
    """The evidence about the reward model's verdicts, cell by cell, and the choice it makes
    (see the module docstring)."""

    def __init__(self, *, tolerance: float, audit_share: float, memory_steps: int,
                 threshold: float, seed: int = 0):
        self.tolerance, self.audit_share, self.threshold = tolerance, audit_share, threshold
        self.fade = 0.5 ** (1.0 / memory_steps)  # a step's factor: half in memory_steps steps
        self.seed = seed
        self.cells: dict[Cell, Counts] = {}

    def trusted(self, cell: Cell) -> bool:
        return self.cells.get(cell, Counts()).error <= self.tolerance

    def plan(self, rollouts: Sequence[Rollout], candidates: Sequence[int], step: int
             ) -> AskingPlan:
        """Which candidates to ask about this step (``candidates`` in their asking order, the
        highest-paid first): the audits of the trusted cells, then the candidates in the others.
        Fades the counts once (a step)."""
        for c in self.cells.values():
            c.asked *= self.fade
            c.wrong *= self.fade
        rng = random.Random(f"{self.seed}:{step}:audit")
        unsure, audits, confident, bands = [], [], 0, set()
        for i in candidates:
            s = score_of(rollouts[i])
            if s is None or not self.trusted(cell_of(rollouts[i], s)):
                unsure.append(i)
                if s is not None:
                    bands.add(cell_of(rollouts[i], s)[1])
                continue
            confident += 1
            if rng.random() < self.audit_share:
                audits.append(i)
        # the audits first: the cap must never starve the check on what is trusted
        return AskingPlan(audits + unsure, len(unsure), confident, len(audits),
                          tuple(sorted(bands)))

    def learn(self, rollouts: Sequence[Rollout], plan: AskingPlan,
              verdicts: Sequence[tuple[int, bool]]) -> dict[str, float]:
        """The judge's new verdicts on this step's ``plan``, ``(index, right)`` pairs, counted in
        their cells; returns the step's metrics (``judge/``, ``docs/metrics.md``): the candidates
        asked as unsure and those trusted, the audits and what they found, the cells trusted,
        and the lowest and highest score asked as unsure (where any was)."""
        audited = set(plan.ask[:plan.audits])  # the plan puts its audits first
        audit_calls = audit_wrong = 0
        for i, right in verdicts:
            s = score_of(rollouts[i])
            if s is None:
                continue
            wrong = (s >= self.threshold) != right
            cell = cell_of(rollouts[i], s)
            c = self.cells.setdefault(cell, Counts())
            c.asked += 1.0
            c.wrong += float(wrong)
            if i in audited:
                audit_calls += 1
                audit_wrong += wrong
                if wrong:  # a confident verdict found wrong: its cell earns its trust again
                    self.cells[cell] = Counts(asked=1.0, wrong=1.0)
        m = {"judge/unsure": plan.unsure, "judge/confident": plan.confident,
             "judge/audits": plan.audits, "judge/audit_calls": audit_calls,
             "judge/audit_wrong": audit_wrong,
             "judge/trusted_cells": float(sum(self.trusted(c) for c in self.cells))}
        if plan.bands:  # none asked as unsure: no band to say
            m.update({"judge/unsure_low": plan.bands[0] / BANDS,
                      "judge/unsure_high": (plan.bands[-1] + 1) / BANDS})
        return m

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        return {"cells": [[form, band, c.asked, c.wrong]
                          for (form, band), c in sorted(self.cells.items())]}

    def load_state_dict(self, state: Any) -> None:
        """What :meth:`state_dict` saved; anything else is a :class:`~cooper.errors.UserError`."""
        try:
            cells = {}
            for form, band, asked, wrong in state["cells"]:
                if not (0 <= int(form) < len(FORMS) and 0 <= int(band) < BANDS
                        and 0.0 <= float(wrong) <= float(asked)):
                    raise ValueError(f"the cell {[form, band, asked, wrong]} is out of range")
                cells[(int(form), int(band))] = Counts(float(asked), float(wrong))
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(f"the judge's saved asking state is not what a run writes ({e}): it "
                            f"should hold cells as [[form 0-{len(FORMS) - 1}, band 0-{BANDS - 1}, "
                            "asked, wrong], ...]; restore it from the run's other checkpoint, or "
                            "start a new run") from None
        self.cells = cells

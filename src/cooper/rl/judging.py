"""Asking a judge about a step's rollouts: each distinct answer once, within a budget, loud when
the judge never answers.

Two uses in a run, each a setting (``docs/training.md``, "Labels beyond the rule"):

- ``reward.judge_rejected`` (TinyV's design): every rollout the rule rejects is put to the
  judge, and a "yes" pays 1 (:meth:`RolloutJudge.pay_rejected`);
- ``rm_update.labels=judge`` (``reward.mode=judged`` sets it): Cooper's update takes labels from
  the judge where the rule's "no" says nothing (it could not read the answer or the reference)
  or the reward model disagrees with it, at most ``judge.budget`` of the step's rollouts, the
  highest-paid first (:meth:`RolloutJudge.label_rejections`, :func:`stage2_candidates`); with
  ``judge.asking=adaptive`` only where the reward model is unsure or has been found wrong, and
  a random audit of the rest (:mod:`cooper.rl.asking`).

With ``judge.counterfactual`` (on in ``reward.mode=judged``) every "yes" is checked once more:
the judge is asked about the same solution with its final answer's wrong twin
(:func:`cooper.labelling.counterfactual.make_twin`: one change in the answer's own text,
certified not equivalent to the answer the judge called right nor to the reference); a judge
that calls that right too was not reading the answer, and its "yes" gives no label
(``judge/doubted``), nor does one that cannot be checked (an answer with no certified twin,
counted by its kind: ``judge/untwinnable``). A "yes" about a reply that states no final
answer at all (an empty one, ".", "Thought process:") is the judge's mistake whatever it read:
no reply without an answer is right, so it is taught as "no" (``judge/overruled``), and the
reward model learns that a reply with nothing in it is wrong instead of never hearing of it
(a learned judge calls such replies right, and a reward model that pays them is hacked by
them). Each other "yes" costs one more call.

The judge is any :class:`cooper.labelling.judge.Judge`: an LLM behind an endpoint, a local
model, or the testbeds' gold judge. :class:`RolloutJudge` owns everything the asking depends
on: the judge, its budget and threshold, and what it was told, keyed by the problem and the
final answer (:func:`answer_key`), so the same answer to the same problem is asked once in the
whole run and a later step gets it for free. With several processes each asks its share of the
new answers and the verdicts are gathered, so every process labels alike. A call that fails,
times out, raises or answers nonsense gives no label (counted), never a guess; but a judge that
gives no verdict at all on ``judge.fail_steps`` steps in a row stops the run, naming itself
and its last failure (a wrong URL must not quietly turn a judged run into a rule-labelled
one). Its state is saved in every checkpoint, so a resumed run asks what an uninterrupted one
would.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cooper.config.reward_sections import JudgeConfig
from cooper.errors import UserError
from cooper.infra.collective import Collective, SingleProcess
from cooper.rl.asking import AdaptiveAsking, score_of
from cooper.rl.blind_spot import rule_read
from cooper.types import Rollout
from cooper.verify.extraction import clean_answer

if TYPE_CHECKING:
    from cooper.labelling.judge import Judge

log = logging.getLogger(__name__)

Key = tuple[str, str]


class JudgeUnavailable(UserError):
    """The judge gave no verdict on ``judge.fail_steps`` steps in a row."""


def answer_key(r: Rollout) -> Key:
    """(problem, final answer): what the judge's verdict depends on. A rollout with no final
    answer the rule could extract is keyed by its whole text."""
    answer = clean_answer(r.extracted) if r.extracted is not None else "\x00" + r.completion
    return r.problem_id, answer


@dataclass(frozen=True)
class JudgeRound:
    """What one step asked of the judge (logged under ``judge/``, :func:`judge_metrics`)."""

    rollouts: int  # the step's rollouts, over all processes
    candidates: int  # rollouts the judge was to label
    distinct: int  # distinct (problem, answer) among them
    cached: int  # of those, decided in an earlier step or call (free)
    asked: int  # new calls to the judge
    unlabelled: int  # candidates left without a label (over budget, or no verdict)
    failed: int  # calls that gave no verdict (failed, unparsed, an exception)
    yes: int  # calls answered "right"
    no: int  # calls answered "wrong"
    seconds: float
    twins: int = 0  # of ``asked``, calls about a "yes"'s wrong twin (judge.counterfactual)
    doubted: int = 0  # "yes" verdicts given no label: the twin was called right too, or unchecked
    overruled: int = 0  # "yes" verdicts on a reply with no final answer, taught as "no"
    untwinnable: dict[str, int] = field(default_factory=dict)  # doubted "yes": no twin, by kind
    failed_steps: int = 0  # steps in a row, this one included, on which every call failed
    asking: dict[str, float] = field(default_factory=dict)  # how the step chose (labelling)


def judge_metrics(r: JudgeRound) -> dict[str, float]:
    """The round as logged metrics (each defined in ``docs/metrics.md``); the run's total calls
    come with the judge's own counters (:meth:`RolloutJudge.metrics`)."""
    return {"judge/candidates": r.candidates, "judge/asked": r.asked,
            "judge/asked_share": r.asked / r.rollouts if r.rollouts else 0.0,
            "judge/cached": r.cached, "judge/unlabelled": r.unlabelled,
            "judge/failed": r.failed, "judge/yes": r.yes, "judge/no": r.no,
            "judge/failed_steps": r.failed_steps, "perf/judge": r.seconds,
            "judge/twins": r.twins, "judge/doubted": r.doubted,
            "judge/overruled": r.overruled,
            "judge/untwinnable": float(sum(r.untwinnable.values())),
            **{f"judge/untwinnable/{k}": float(n) for k, n in sorted(r.untwinnable.items())},
            **r.asking}


class RolloutJudge:
    """A :class:`~cooper.labelling.judge.Judge` asked about rollouts: its budget and threshold
    (``judge.*``), its memory of verdicts, and a count of the steps in a row on which it gave
    none (see the module docstring). ``name`` says which judge it is in an error."""

    def __init__(self, judge: Judge, *, budget: float = 0.1, threshold: float = 0.5,
                 fail_steps: int = 3, name: str | None = None,
                 collective: Collective | None = None, asking: AdaptiveAsking | None = None,
                 counterfactual: bool = False):
        self.judge, self.budget, self.threshold, self.fail_steps = judge, budget, threshold, fail_steps
        self.asking = asking  # judge.asking=adaptive (None: the budget, every step)
        self.counterfactual = counterfactual  # check each "yes" on the answer's wrong twin
        self.name = name or getattr(judge, "name", type(judge).__name__)
        self.collective = collective or SingleProcess()
        self.verdicts: dict[Key, bool] = {}
        self.doubted: set[Key] = set()  # a "yes" its twin check did not confirm: no label, ever
        self.calls = 0  # new calls over the run, every process's
        self.failed_steps = 0  # steps in a row on which every call failed
        self.last_failure = ""

    # ------------------------------------------------------------------ the two uses

    def pay_rejected(self, mine: list[Rollout], everyone: list[Rollout], *, ask: bool = True
                     ) -> tuple[list[Rollout], list[Rollout], JudgeRound]:
        """``reward.judge_rejected``: every rollout the rule rejected, put to the judge (each
        distinct answer once); its verdict rides on the rollout (``judged``), this process's
        (``mine``) and the gathered step's (``everyone``) alike. ``ask=False`` (the policy's
        evaluation) uses the verdicts known already and makes no new call."""
        rejected = [r for r in everyone if not r.correct]
        labels, judged = self.label(rejected, limit=None if ask else 0)
        verdicts = {answer_key(r): v for r, v in zip(rejected, labels, strict=True)}

        def with_verdict(rs: list[Rollout]) -> list[Rollout]:
            return [r if r.correct else replace(r, judged=verdicts.get(answer_key(r))) for r in rs]

        return with_verdict(mine), with_verdict(everyone), replace(judged, rollouts=len(everyone))

    def label_rejections(self, everyone: list[Rollout], step: int = 0
                         ) -> tuple[list[Rollout], JudgeRound]:
        """``rm_update.labels=judge``: the step's rollouts labelled for the update (``correct``
        is the label; ``judged`` is set where the judge gave it): the rule's yes, its trusted
        no, and the judge's verdicts on the rest, in :func:`stage2_candidates`' order; a
        rollout with no label is left out. New calls: at most ``budget`` of the rollouts; with
        ``judge.asking=adaptive`` only about the candidates :class:`AdaptiveAsking` picks
        (where the reward model is unsure, and its audits), whose verdicts it then learns from;
        answers judged before label the others for free either way."""
        adaptive = self.asking is not None
        trusted, candidates = stage2_candidates(everyone, self.threshold,
                                                no_answer_is_wrong=adaptive)
        cap = math.floor(self.budget * len(everyone))
        extra = {"judge/no_answer": float(sum(not r.correct and r.extracted is None
                                              for r in everyone))}
        if self.asking is None:
            labels, judged = self.label([everyone[i] for i in candidates], limit=cap)
        else:
            plan = self.asking.plan(everyone, candidates, step)
            chosen = set(plan.ask)
            candidates = plan.ask + [i for i in candidates if i not in chosen]
            known = set(self.verdicts)
            new = {answer_key(everyone[i]) for i in plan.ask} - known
            labels, judged = self.label([everyone[i] for i in candidates],
                                        limit=min(cap, len(new)))
            learnt: dict[Key, tuple[int, bool]] = {}
            for i in plan.ask:  # each new verdict once, with the first rollout that asked it
                k = answer_key(everyone[i])
                if k not in known and k in self.verdicts:
                    learnt.setdefault(k, (i, self.verdicts[k]))
            extra.update(self.asking.learn(everyone, plan, list(learnt.values())))
        keep = {i: r for i, r in enumerate(everyone) if r.correct}
        keep.update((i, everyone[i]) for i in trusted)
        keep.update((i, replace(everyone[i], correct=label, judged=label))
                    for i, label in zip(candidates, labels, strict=True) if label is not None)
        return [keep[i] for i in sorted(keep)], replace(judged, rollouts=len(everyone),
                                                        asking=extra)

    def with_known_verdicts(self, rollouts: list[Rollout]) -> list[Rollout]:
        """``rollouts`` with the judge's verdict (``judged``) on each rejected one it decided,
        this step or before (``reward.judge_pays``); no call is made."""
        return [r if r.correct or r.judged is not None
                else replace(r, judged=self.verdicts.get(answer_key(r))) for r in rollouts]

    # ------------------------------------------------------------------ asking

    def label(self, rollouts: Sequence[Rollout], *, limit: int | None = None
              ) -> tuple[list[bool | None], JudgeRound]:
        """The judge's verdict on each rollout (None: no label), asking about at most ``limit``
        distinct answers not decided before (None: all), in the order they first appear: the
        caller puts first what it wants judged first. ``rollouts`` must be the same list on
        every process (the gathered step). Raises :class:`JudgeUnavailable` on the
        ``fail_steps``-th step in a row whose every call failed."""
        t = time.perf_counter()
        keys = [answer_key(r) for r in rollouts]
        first: dict[Key, Rollout] = {}
        for k, r in zip(keys, rollouts, strict=True):
            first.setdefault(k, r)
        new = [k for k in first if k not in self.verdicts and k not in self.doubted]
        ask = new if limit is None else new[:max(0, limit)]
        c = self.collective
        mine = ask[c.rank::c.world_size]
        answers = c.gather_objects(list(zip(mine, self._checked([first[k] for k in mine]),
                                            strict=True)))
        got = {k: v for k, (v, _, _, _, _) in answers}
        twins = sum(t for _, (_, t, _, _, _) in answers)
        doubted = {k for k, (_, _, d, _, _) in answers if d}
        overruled = sum(o for _, (_, _, _, o, _) in answers)
        untwinnable: dict[str, int] = {}
        for _, (*_, kind) in answers:
            if kind is not None:
                untwinnable[kind] = untwinnable.get(kind, 0) + 1
        for k, v in got.items():
            if k in doubted:
                self.doubted.add(k)
            elif v is not None:
                self.verdicts[k] = v
        self.calls += len(ask) + twins
        labels = [self.verdicts.get(k) for k in keys]
        decided = [v for v in got.values() if v is not None]
        if got:  # a step that asked: did any call answer?
            self.failed_steps = 0 if decided else self.failed_steps + 1
        if self.fail_steps and self.failed_steps >= self.fail_steps:
            raise JudgeUnavailable(
                f"the judge ({self.name}) gave no verdict on {self.failed_steps} steps in a row "
                f"(its last failure: {self.last_failure or 'unknown'}); check that it is up and "
                "reachable (judge.base_url, judge.model), or set judge.fail_steps=0 to go on with "
                "those answers unlabelled (the rule's labels alone)")
        return labels, JudgeRound(
            rollouts=len(rollouts), candidates=len(rollouts), distinct=len(first),
            cached=len(first) - len(new), asked=len(ask) + twins,
            unlabelled=sum(v is None for v in labels), failed=len(got) - len(decided),
            yes=sum(decided), no=len(decided) - sum(decided), seconds=time.perf_counter() - t,
            twins=twins, doubted=len(doubted), overruled=overruled,
            untwinnable=untwinnable, failed_steps=self.failed_steps)

    def _checked(self, rollouts: list[Rollout]
                 ) -> list[tuple[bool | None, int, bool, bool, str | None]]:
        """(verdict, twin calls, doubted, overruled, untwinnable kind) for each rollout: the
        judge's verdict and, with ``counterfactual``, each "yes" checked (see the module
        docstring): overruled (taught as "no") where the reply states no final answer; else
        doubted where its wrong twin was called right too, got no verdict, or could not be made
        (then the answer's kind is given)."""
        verdicts = self._ask(rollouts)
        if not self.counterfactual:
            return [(v, 0, False, False, None) for v in verdicts]
        from cooper.labelling.counterfactual import make_twin
        from cooper.verify.extraction import find_answer

        yes = [i for i, v in enumerate(verdicts) if v]
        # the same reading as the twin's and the gold judge's: no final answer, nothing to be right
        answerless = {i for i in yes if find_answer(rollouts[i].completion, "strict") is None}
        # certified against the answer the judge called right (the reply's own) and the reference
        twins = {i: make_twin(rollouts[i].completion, rollouts[i].reference,
                              question=rollouts[i].question)
                 for i in yes if i not in answerless}
        made = [i for i in twins if twins[i].text is not None]
        seen = self._ask([replace(rollouts[i], completion=twins[i].text) for i in made])
        confirmed = {i for i, v in zip(made, seen, strict=True) if v is False}
        return [(False, 0, False, True, None) if i in answerless else
                (v, int(i in made), bool(v) and i not in confirmed, False,
                 twins[i].kind if i in twins and i not in made else None)
                for i, v in enumerate(verdicts)]

    def _ask(self, rollouts: list[Rollout]) -> list[bool | None]:
        """The judge's verdicts; None where it gave none (the reason kept in
        ``last_failure``). Never raises: a judge that fails gives no label."""
        if not rollouts:
            return []
        from cooper.labelling.judge import JudgeItem

        items = [JudgeItem(r.question, r.reference, r.completion) for r in rollouts]
        try:
            verdicts = self.judge.judge(items)
        except Exception as e:  # noqa: BLE001 -- any failure of the judge is "no label"
            self.last_failure = f"{type(e).__name__}: {e}"
            log.warning("the judge (%s) failed on %d answers, which get no label: %s",
                        self.name, len(items), self.last_failure)
            return [None] * len(items)
        if len(verdicts) != len(items):
            self.last_failure = f"{len(verdicts)} verdicts for {len(items)} answers"
            log.warning("the judge (%s) gave %s; none is used", self.name, self.last_failure)
            return [None] * len(items)
        for v in verdicts:
            if v.correct is None:
                self.last_failure = v.error or f"{v.verdict} reply: {v.output[:200]!r}"
        return [v.correct for v in verdicts]

    # ------------------------------------------------------------------ bookkeeping

    def metrics(self) -> dict[str, float]:
        """The judge's own counters (an endpoint's retries and failures, the gold judge's
        flips), under ``judge/``."""
        try:
            raw = self.judge.metrics()
        except Exception:  # noqa: BLE001 -- counters are a courtesy, never a failure
            return {}
        return {f"judge/{k}": float(v) for k, v in raw.items()}

    def state_dict(self) -> dict[str, Any]:
        state = {"calls": self.calls, "failed_steps": self.failed_steps,
                 "verdicts": [[p, a, v] for (p, a), v in self.verdicts.items()]}
        if self.doubted:
            state["doubted"] = sorted([p, a] for p, a in self.doubted)
        if self.asking is not None:
            state["asking"] = self.asking.state_dict()
        return state

    def load_state_dict(self, state: Any) -> None:
        """What :meth:`state_dict` saved; anything else (an edited or foreign file) is a
        :class:`~cooper.errors.UserError` that says what the file should hold."""
        try:
            verdicts = {(str(p), str(a)): v for p, a, v in state.get("verdicts", [])}
            doubted = {(str(p), str(a)) for p, a in state.get("doubted", [])}
            calls, failed = int(state.get("calls", 0)), int(state.get("failed_steps", 0))
            if not all(isinstance(v, bool) for v in verdicts.values()):
                raise ValueError("a verdict is not true or false")
        except (AttributeError, TypeError, ValueError) as e:
            raise UserError(f"the judge's saved state is not what a run writes ({e}): it should "
                            "hold calls, failed_steps and verdicts as [[problem, answer, true or "
                            "false], ...]; restore it from the run's other checkpoint, or start a "
                            "new run") from None
        if self.asking is not None:
            if not isinstance(state.get("asking"), dict):
                raise UserError("the judge's saved state has no asking state (the run was saved "
                                "with judge.asking=budget): resume with judge.asking=budget, or "
                                "start a new run with judge.asking=adaptive")
            self.asking.load_state_dict(state["asking"])
        self.calls, self.failed_steps, self.verdicts = calls, failed, verdicts
        self.doubted = doubted

    def close(self) -> None:
        self.judge.close()


def stage2_candidates(rollouts: Sequence[Rollout], threshold: float, *,
                      no_answer_is_wrong: bool = False) -> tuple[list[int], list[int]]:
    """How Cooper's update labels the rule's rejections with a judge (``rm_update.labels=judge``):
    (trusted negatives, candidates for the judge), as indices into ``rollouts``.

    The rule's "no" is trusted where it read the answer and the reference as different numbers
    (:func:`~cooper.rl.blind_spot.rule_read`) and the reward model pays under ``threshold``. Where
    it rejects and the reward model pays at least ``threshold`` (they disagree), or it could not
    read the answer or the reference (its "no" says nothing), the judge decides, the
    highest-paid candidates first, unscored ones last (ties in sampling order). A rollout the
    rule accepts is neither (it is a positive). ``no_answer_is_wrong`` (adaptive asking): a
    rejected rollout with no final answer at all is a trusted negative, never a judge call
    (there is no final answer to judge; what it is paid does not change)."""
    trusted, candidates = [], []
    for i, r in enumerate(rollouts):
        if r.correct:
            continue
        if no_answer_is_wrong and r.extracted is None:
            trusted.append(i)
            continue
        score = score_of(r)
        disagree = score is not None and score >= threshold
        if rule_read(r) and not disagree:
            trusted.append(i)
        else:
            candidates.append(i)

    def first(i: int) -> float:  # the smaller, the sooner asked
        s = score_of(rollouts[i])
        return math.inf if s is None else -s

    return trusted, sorted(candidates, key=first)  # stable: ties in sampling order


def rollout_judge(cfg: JudgeConfig, *, asked: bool, seed: int = 0, dtype: str | None = None,
                  judge: Judge | None = None, collective: Collective | None = None
                  ) -> RolloutJudge | None:
    """The judge a run asks, with ``judge.*``'s budget, threshold and fail_steps: ``judge`` when
    the caller built one (the drop-in's ``judge=Judge``), else the one ``cfg`` names; None when
    nothing asks it (``asked``)."""
    if not asked:
        return None
    if judge is None:
        from cooper.labelling.judge_config import judge_from_config

        judge = judge_from_config(cfg, seed=seed, dtype=dtype)
    name = (f"{cfg.backend} {cfg.model} at {cfg.base_url}" if cfg.backend == "endpoint"
            else None)
    asking = (AdaptiveAsking(tolerance=cfg.tolerance, audit_share=cfg.audit_share,
                             memory_steps=cfg.memory_steps, threshold=cfg.threshold, seed=seed)
              if cfg.asking == "adaptive" else None)
    return RolloutJudge(judge, budget=cfg.budget, threshold=cfg.threshold,
                        fail_steps=cfg.fail_steps, name=name, collective=collective,
                        asking=asking, counterfactual=cfg.counterfactual)

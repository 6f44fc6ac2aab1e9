"""Asking a judge about a step's rollouts: each distinct answer once, within a budget, never a
crash.

Two uses in a run, each a setting (``docs/training.md``, "Labels beyond the rule"):

- ``reward.judge_rejected`` (TinyV's design): every rollout the rule rejects is put to the
  judge, and a "yes" pays 1;
- ``rm_update.labels=judge``: Cooper's update takes labels from the judge where the rule's "no" says
  nothing (it could not read the answer or the reference) or the reward model disagrees with it,
  at most ``judge.budget`` of the step's rollouts (:func:`stage2_candidates` orders them; with
  ``judge.audit``, :func:`audit_order` draws part of them at random instead, and with
  ``judge.audit_grow`` each drawn answer the judge calls wrong buys one more draw the next step).

The judge is any :class:`cooper.labelling.judge.Judge`: an LLM behind an endpoint, a local
model, or the testbeds' gold judge. :class:`RolloutJudge` keeps what it was told, keyed by the
problem and the final answer (:func:`answer_key`), so the same answer to the same problem is
asked once in the whole run, and a later step gets it for free; with several processes each asks
its share of the new answers and the verdicts are gathered, so every process labels alike. A
call that fails, times out, raises or answers nonsense gives no label (counted), never a guess;
the run goes on. Its record is saved in every checkpoint, so a resumed run asks what an
uninterrupted one would.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Container, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cooper.infra.collective import Collective, SingleProcess
from cooper.rl.blind_spot import rule_read
from cooper.types import Rollout
from cooper.verify.extraction import clean_answer
from cooper.verify.verifier import verify_batch

if TYPE_CHECKING:
    from cooper.config.train import JudgeConfig, TrainConfig
    from cooper.labelling.judge import Judge

log = logging.getLogger(__name__)

Key = tuple[str, str]

PRECISION_DECAY = 0.95
"""the weight a step's audit draws keep per later step in :meth:`RolloutJudge.paid_precision`:
about the last 20 steps count (20 draws at one a step, a standard error near 0.1), so an exploit
that grows over a few tens of steps moves the estimate while it grows"""


def answer_key(r: Rollout) -> Key:
    """(problem, final answer): what the judge's verdict depends on. A rollout with no final
    answer the rule could extract is keyed by its whole text."""
    answer = clean_answer(r.extracted) if r.extracted is not None else "\x00" + r.completion
    return r.problem_id, answer


@dataclass(frozen=True)
class JudgeRound:
    """What one step asked of the judge (logged under ``judge/``, :func:`judge_metrics`)."""

    rollouts: int  # the step's rollouts, over all processes (the callers below set it)
    candidates: int  # rollouts the judge was to label
    distinct: int  # distinct (problem, answer) among them
    cached: int  # of those, decided in an earlier step or call (free)
    asked: int  # new calls to the judge
    unlabelled: int  # candidates left without a label (over budget, or no verdict)
    failed: int  # calls that gave no verdict (failed, unparsed, an exception)
    yes: int  # calls answered "right"
    no: int  # calls answered "wrong"
    seconds: float
    audited: int = 0  # of the calls, drawn at random (``judge.audit``, :func:`audit_order`)
    audited_yes: int = 0  # of those, answered "right"
    extra: int = 0  # of the drawn, beyond the budget (``judge.audit_grow``)
    paid_precision: float | None = None  # the estimate after this step's draws (with an audit)


def judge_metrics(r: JudgeRound) -> dict[str, float]:
    """The round as logged metrics (each defined in ``docs/metrics.md``); the run's total calls
    come with the judge's own counters (:meth:`RolloutJudge.metrics`)."""
    return {"judge/candidates": r.candidates, "judge/asked": r.asked,
            "judge/asked_share": r.asked / r.rollouts if r.rollouts else 0.0,
            "judge/cached": r.cached, "judge/unlabelled": r.unlabelled,
            "judge/failed": r.failed, "judge/yes": r.yes, "judge/no": r.no,
            "judge/audited": r.audited, "judge/audited_yes": r.audited_yes,
            "judge/audit_extra": r.extra,
            **({"judge/paid_precision": r.paid_precision} if r.paid_precision is not None
               else {}),
            "perf/judge": r.seconds}


class RolloutJudge:
    """A :class:`~cooper.labelling.judge.Judge` asked about rollouts, with a memory of its
    verdicts (see the module docstring). ``audit`` is the share of Cooper's judge budget drawn at
    random (:func:`audit_order`), from draws seeded by ``seed`` and the step, among every candidate
    (``audit_from="all"``) or only those the reward model pays at least the threshold (``"paid"``);
    ``audit_grow`` caps the draws a step adds beyond the budget, one for each drawn answer the
    judge called wrong the step before (``extra``)."""

    def __init__(self, judge: Judge, *, collective: Collective | None = None,
                 audit: float = 0.0, seed: int = 0, audit_from: str = "all",
                 audit_grow: int = 0, order: str = "paid"):
        self.judge = judge
        self.audit, self.seed, self.audit_from, self.order = audit, seed, audit_from, order
        self.audit_grow = audit_grow
        self.collective = collective or SingleProcess()
        self.verdicts: dict[Key, bool] = {}
        self.calls = 0  # new calls over the run, every process's
        self.extra = 0  # draws the next step adds beyond the budget (``audit_grow``)
        self.audit_right = self.audit_drawn = 0.0  # the audit's verdicts, decayed per step

    def paid_precision(self) -> float:
        """The share of the answers the reward model pays beyond the rule that are right, as the
        audit's draws among them say: (right + 1) / (drawn + 2), each step's draws weighed
        ``PRECISION_DECAY`` less per step since (1/2 before any draw). What
        ``reward.hybrid_scores=audited`` pays such an answer per unit of score."""
        return (self.audit_right + 1.0) / (self.audit_drawn + 2.0)

    def observe_audit(self, verdicts: Sequence[bool | None]) -> None:
        """Count one step's drawn answers (no verdict: not counted) into :meth:`paid_precision`."""
        decided = [v for v in verdicts if v is not None]
        self.audit_right = PRECISION_DECAY * self.audit_right + sum(decided)
        self.audit_drawn = PRECISION_DECAY * self.audit_drawn + len(decided)

    def label(self, rollouts: Sequence[Rollout], *, limit: int | None = None
              ) -> tuple[list[bool | None], JudgeRound]:
        """The judge's verdict on each rollout (None: no label), asking about at most ``limit``
        distinct answers not decided before (None: all), in the order they first appear: the
        caller puts first what it wants judged first. ``rollouts`` must be the same list on
        every process (the gathered step)."""
        t = time.perf_counter()
        keys = [answer_key(r) for r in rollouts]
        first: dict[Key, Rollout] = {}
        for k, r in zip(keys, rollouts, strict=True):
            first.setdefault(k, r)
        new = [k for k in first if k not in self.verdicts]
        ask = new if limit is None else new[:max(0, limit)]
        c = self.collective
        mine = ask[c.rank::c.world_size]
        answers = c.gather_objects(list(zip(mine, self._ask([first[k] for k in mine]),
                                            strict=True)))
        got = dict(answers)
        for k, v in got.items():
            if v is not None:
                self.verdicts[k] = v
        self.calls += len(ask)
        labels = [self.verdicts.get(k) for k in keys]
        decided = [v for v in got.values() if v is not None]
        return labels, JudgeRound(
            rollouts=len(rollouts), candidates=len(rollouts), distinct=len(first),
            cached=len(first) - len(new), asked=len(ask),
            unlabelled=sum(v is None for v in labels), failed=len(got) - len(decided),
            yes=sum(decided), no=len(decided) - sum(decided), seconds=time.perf_counter() - t)

    def _ask(self, rollouts: list[Rollout]) -> list[bool | None]:
        """The judge's verdicts; None where it gave none. Never raises: a judge that fails
        gives no label."""
        if not rollouts:
            return []
        from cooper.labelling.judge import JudgeItem

        items = [JudgeItem(r.question, r.reference, r.completion) for r in rollouts]
        try:
            verdicts = self.judge.judge(items)
        except Exception as e:  # noqa: BLE001 -- any failure of the judge is "no label"
            log.warning("the judge (%s) failed on %d answers, which get no label: %s: %s",
                        getattr(self.judge, "name", "?"), len(items), type(e).__name__, e)
            return [None] * len(items)
        if len(verdicts) != len(items):
            log.warning("the judge (%s) gave %d verdicts for %d answers; none is used",
                        getattr(self.judge, "name", "?"), len(verdicts), len(items))
            return [None] * len(items)
        return [v.correct for v in verdicts]

    def metrics(self) -> dict[str, float]:
        """The judge's own counters (an endpoint's retries and failures, the gold judge's
        flips), under ``judge/``."""
        try:
            raw = self.judge.metrics()
        except Exception:  # noqa: BLE001 -- counters are a courtesy, never a failure
            return {}
        return {f"judge/{k}": float(v) for k, v in raw.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "extra": self.extra, "audit_right": self.audit_right,
                "audit_drawn": self.audit_drawn,
                "verdicts": [[p, a, v] for (p, a), v in self.verdicts.items()]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = int(state.get("calls", 0))
        self.extra = int(state.get("extra", 0))
        self.audit_right = float(state.get("audit_right", 0.0))
        self.audit_drawn = float(state.get("audit_drawn", 0.0))
        self.verdicts = {(str(p), str(a)): bool(v) for p, a, v in state.get("verdicts", [])}

    def close(self) -> None:
        self.judge.close()


def rollout_judge(cfg: TrainConfig, collective: Collective | None = None) -> RolloutJudge | None:
    """The judge a ``cooper train`` run asks (``judge.*``), None when no setting asks one."""
    if not (cfg.reward.judge_rejected or cfg.rm_update.labels == "judge"):
        return None
    from cooper.labelling.judge import judge_from_config

    judge = judge_from_config(cfg.judge, seed=cfg.seed, dtype=cfg.policy.dtype)
    return (RolloutJudge(judge, collective=collective, seed=cfg.seed, **audit_settings(cfg.judge))
            if judge is not None else None)


def audit_settings(cfg: JudgeConfig) -> dict[str, Any]:
    """The ``judge.audit*`` settings as :class:`RolloutJudge`'s keyword arguments: one place for
    both a ``cooper train`` run's judge and the drop-in's."""
    return {"audit": cfg.audit, "audit_from": cfg.audit_from, "audit_grow": cfg.audit_grow,
            "order": cfg.order}


def drop_in_judge(judge: Judge | JudgeConfig | None, *, labels: str, judge_rejected: bool,
                  mode: str, updates: bool, budget: float, threshold: float, seed: int = 0,
                  dtype: str | None = None) -> tuple[RolloutJudge | None, float, float]:
    """The judge of a :class:`~cooper.rl.trl_reward.CooperRewardFunction` (``judge=``), checked
    against what asks it (``labels="judge"``, ``judge_rejected=True``), with its budget and
    threshold (a :class:`~cooper.config.train.JudgeConfig` brings its own); None when nothing
    asks it."""
    from cooper.config.engine import ConfigError
    from cooper.config.train import JudgeConfig

    asks = [k for k, on in (("labels='judge'", labels == "judge"),
                            ("judge_rejected=True", judge_rejected)) if on]
    if asks and judge is None:
        raise ConfigError(f"{' and '.join(asks)} ask(s) a judge: pass judge=... (a Judge, "
                          "e.g. from cooper.labelling.make_judge, or a JudgeConfig)")
    if judge_rejected and mode != "rule":
        raise ConfigError("judge_rejected=True pays the judge's yes where the rule says no: "
                          "use it with mode='rule'")
    if labels == "judge" and not updates:
        raise ConfigError(f"labels='judge' labels the reward model's update, which "
                          f"mode={mode!r} does not run: use 'cooper' or 'hybrid_cooper'")
    audit: dict[str, Any] = {}  # a Judge alone: no audit
    if isinstance(judge, JudgeConfig):
        from cooper.labelling.judge import judge_from_config

        budget, threshold, audit = judge.budget, judge.threshold, audit_settings(judge)
        judge = judge_from_config(judge.check(), seed=seed, dtype=dtype) if asks else None
    asked = (RolloutJudge(judge, seed=seed, **audit) if asks and judge is not None else None)
    return asked, budget, threshold


def paid_score(r: Rollout) -> float | None:
    """What the reward model pays ``r`` (None when it has no finite score)."""
    return r.rm_score if r.rm_score is not None and math.isfinite(r.rm_score) else None


def stage2_candidates(rollouts: Sequence[Rollout], threshold: float, order: str = "paid"
                      ) -> tuple[list[int], list[int]]:
    """How Cooper's update labels the rule's rejections with a judge (``rm_update.labels=judge``):
    (trusted negatives, candidates for the judge), as indices into ``rollouts``.

    The rule's "no" is trusted where it read the answer and the reference as different numbers
    (:func:`~cooper.rl.blind_spot.rule_read`) and the reward model pays under ``threshold``. Where
    it rejects and the reward model pays at least ``threshold`` (they disagree), or it could not
    read the answer or the reference (its "no" says nothing), the judge decides. ``order``
    (``judge.order``): ``"paid"`` puts the highest-paid candidates first, so the disagreements
    the reward model is surest of are judged first; ``"doubtful"`` puts first those it pays
    nearest ``threshold``, the answers it is least sure of (uncertainty sampling: a small budget
    spent highest-paid first mostly confirms answers it already pays rightly). Unscored
    candidates come last either way. A rollout the rule accepts is neither (it is a positive)."""
    trusted, candidates = [], []
    for i, r in enumerate(rollouts):
        if r.correct:
            continue
        score = paid_score(r)
        disagree = score is not None and score >= threshold
        if rule_read(r) and not disagree:
            trusted.append(i)
        else:
            candidates.append(i)

    def first(i: int) -> float:  # the smaller, the sooner asked
        s = paid_score(rollouts[i])
        if s is None:
            return math.inf
        return -s if order == "paid" else abs(s - threshold)

    return trusted, sorted(candidates, key=first)  # stable: ties in sampling order


def audit_order(keys: Sequence[Key], known: Container[Key], limit: int, share: float,
                rng: random.Random, drawable: Container[Key] | None = None, extra: int = 0
                ) -> tuple[list[int], list[Key], int]:
    """``keys`` (the candidates' answers, in the order :func:`stage2_candidates` gives) put in the
    order the judge is to be asked, the answers drawn, and how many new answers to ask: of the
    ``limit`` new answers asked, ``share`` of them (rounded, halves up) are drawn uniformly from
    the new answers the given order would not reach (and, where ``drawable`` is given, are in it),
    and the rest are the first ones of that order; ``extra`` more are drawn beyond the limit
    where there are more to draw. With nothing to draw, the order as given and ``limit``.

    Why: highest-paid first, a small budget mostly confirms answers the reward model already pays
    right; a draw from the rest can reach the answers it pays wrong (an audit). Answers decided
    before (``known``) are free and keep their place after the ones to ask. ``drawable`` holds the
    answers the reward model pays (``judge.audit_from=paid``): the paid wrong ones are what the
    policy is paid for. ``extra`` (``judge.audit_grow``) asks more while the audit finds them."""
    new = list(dict.fromkeys(k for k in keys if k not in known))  # distinct, in order
    limit = max(0, limit)
    draws = min(int(share * limit + 0.5), limit)
    rest = [k for k in new[limit - draws:] if drawable is None or k in drawable]
    drawn = rng.sample(rest, min(draws + max(0, extra), len(rest))) if len(new) > limit else []
    chosen = set(drawn)
    top = [k for k in new if k not in chosen][:limit - min(len(drawn), draws)]
    first = top + drawn
    rank = {k: i for i, k in enumerate(first)}
    order = sorted(range(len(keys)), key=lambda j: rank.get(keys[j], len(first)))  # stable
    return order, drawn, max(limit, len(first))


def judge_rejected(judge: RolloutJudge, mine: list[Rollout], everyone: list[Rollout]
                   ) -> tuple[list[Rollout], list[Rollout], JudgeRound]:
    """``reward.judge_rejected``: every rollout the rule rejected, put to the judge (each
    distinct answer once); its verdict rides on the rollout (``judged``), this process's
    (``mine``) and the gathered step's (``everyone``) alike."""
    rejected = [r for r in everyone if not r.correct]
    labels, judged = judge.label(rejected)
    judged = replace(judged, rollouts=len(everyone))
    verdicts = {answer_key(r): v for r, v in zip(rejected, labels, strict=True)}

    def with_verdict(rs: list[Rollout]) -> list[Rollout]:
        return [r if r.correct else replace(r, judged=verdicts.get(answer_key(r))) for r in rs]

    return with_verdict(mine), with_verdict(everyone), judged


def judged_pool(judge: RolloutJudge, everyone: list[Rollout], *, budget: float,
                threshold: float, gold: bool = False, step: int = 0
                ) -> tuple[list[Rollout], JudgeRound, float | None]:
    """``rm_update.labels=judge``: the step's rollouts labelled for the update (``correct`` is
    the label): the rule's yes, its trusted no, and the judge's verdicts on the rest, asking at
    most ``budget`` of the rollouts (:func:`stage2_candidates`, :func:`audit_order` with the
    judge's ``audit``, and its ``extra`` draws: one for each drawn answer it called wrong the step
    before, at most ``audit_grow``); a rollout with no label is left out. With ``gold``
    (testbeds), also the share of the judge's labels that the gold judge shares (else None)."""
    trusted, candidates = stage2_candidates(everyone, threshold, judge.order)
    limit = asks = math.floor(budget * len(everyone))
    drawn: list[Key] = []
    if judge.audit:
        paid = None
        if judge.audit_from == "paid":
            paid = {answer_key(everyone[i]) for i in candidates
                    if (s := paid_score(everyone[i])) is not None and s >= threshold}
        order, drawn, asks = audit_order([answer_key(everyone[i]) for i in candidates],
                                         judge.verdicts, limit, judge.audit,
                                         random.Random(f"{judge.seed}:{step}:audit"), paid,
                                         extra=judge.extra)
        candidates = [candidates[j] for j in order]
    labels, judged = judge.label([everyone[i] for i in candidates], limit=asks)
    audited = [judge.verdicts.get(k) for k in drawn]
    among_paid = bool(judge.audit) and judge.audit_from == "paid"
    if among_paid:  # what the answers it pays beyond the rule are worth (hybrid_scores=audited)
        judge.observe_audit(audited)
    judged = replace(judged, rollouts=len(everyone), audited=len(drawn),
                     audited_yes=sum(v is True for v in audited), extra=asks - limit,
                     paid_precision=judge.paid_precision() if among_paid else None)
    # the audit grows while it finds wrong answers: one draw more next step for each it found
    judge.extra = min(judge.audit_grow, sum(v is False for v in audited))
    keep = {i: r for i, r in enumerate(everyone) if r.correct}
    keep.update((i, everyone[i]) for i in trusted)
    decided = [(i, label) for i, label in zip(candidates, labels, strict=True)
               if label is not None]
    keep.update((i, replace(everyone[i], correct=label, judged=label)) for i, label in decided)
    agreement = None
    if gold and decided:
        verdicts = verify_batch([everyone[i].completion for i, _ in decided],
                                [everyone[i].reference for i, _ in decided], mode="gold")
        agreement = sum(v.correct == label for v, (_, label) in
                        zip(verdicts, decided, strict=True)) / len(decided)
    return [keep[i] for i in sorted(keep)], judged, agreement

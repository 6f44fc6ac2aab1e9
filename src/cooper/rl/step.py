"""The online reward of Cooper: Stage 1 scores the rollouts, Stage 2 updates the reward model.

This module knows nothing about the RL framework; :mod:`cooper.rl.trl_reward` makes it a TRL
reward function. One RL step (``docs/method.md`` "One Cooper step") as it happens here:

Stage 1, :meth:`CooperReward.score` (when TRL asks for the policy's rewards):
  1. verify every completion against the reference (rule-based, precise);
  2. score every completion with the *current* reward model: that is the policy's reward in the
     ``rm`` and ``cooper`` modes, the verdict is the reward in ``rule`` mode; when only the
     reward model's top layers are updated, the update keeps this pass's hidden states below
     them (:class:`cooper.rm.trunk.StepStates`);
  3. gather the step's rollouts from every process (``reward.judge_rejected``: the judge decides
     each rule-rejected one, and its "yes" pays 1; ``reward.judge_pays``: the update's judge is
     asked now, and its verdicts pay where it gave one), pay each once (:mod:`cooper.rl.pay`), pick
     positives (verified correct; with
     ``rm_update.labels=judge`` also those the judge calls right, and negatives the judge
     calls wrong, where the rule's "no" says nothing: :mod:`cooper.rl.judging`), and hand each
     process its share; with rollout negatives, pair each positive with its prompt's wrong
     rollouts, hardest first, now, while the scores are the ones the policy is paid by; an
     endpoint assistant starts writing its negatives now, in the background. On the testbeds
     the gold judge watches from outside the step (:mod:`cooper.rl.observer`).

Stage 2, :meth:`CooperReward.update` (once the rewards are fixed, so this step's rewards came
from the reward model *before* its update, the paper's order; it runs right after Stage 1,
or, when an endpoint writes negatives in the background, after the policy's optimiser step so
that the network time overlaps it):
  4. negatives written from the positives: assistant proposals that the verifier confirms
     wrong, else the rule-based fallback, else the positive gets no such pair;
  5. the pairwise update of the reward model over every pair (rollout, assistant, and replayed:
     :mod:`cooper.rl.replay`), gradients summed across processes. In ``rule`` and ``rm`` modes
     the reward model is not updated, but the same pairs still measure it
     (``rm/pair_acc_before``): the hacking signal of a frozen reward model.

The policy's own step (TRL's) only reads the rewards Stage 1 returned, and the two updates touch
different weights, so whether it runs before or after Stage 2 changes nothing it computes. What
Stage 1 hands Stage 2, and what Stage 2 reports, are the records of :mod:`cooper.rl.stage2_records`.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from cooper.config.reward_modes import Payer, Stage2
from cooper.config.train import TrainConfig
from cooper.infra.collective import Collective, SingleProcess
from cooper.rl.forms import rollout_form_pairs
from cooper.rl.groups import group_by_problem
from cooper.rl.judging import JudgeRound, RolloutJudge, rollout_judge
from cooper.rl.negatives import NegativeOutcome, NegativeWriter, VerifyFn, build_pairs
from cooper.rl.observer import GoldObserver
from cooper.rl.pairs import (
    RolloutStats,
    replay_pairs,
    rollout_negatives,
    rollout_stats,
    select_positives,
    shard,
)
from cooper.rl.pay import pay
from cooper.rl.replay import Replay
from cooper.rl.stage2_records import Pending, Stage2Stats
from cooper.rm.losses import pair_objective
from cooper.rm.memo import LogitMemo
from cooper.types import Pair, Rollout, Triple
from cooper.verify.verifier import verify_batch

if TYPE_CHECKING:
    from cooper.labelling.judge import Judge
    from cooper.rm.model import RewardModel
    from cooper.rm.update import PairwiseUpdater

log = logging.getLogger(__name__)

_BUILD = object()  # from_config's "not given: build it from the settings"


@dataclass
class Parts:
    """What one :class:`CooperReward` works with, besides its settings: built by
    :meth:`CooperReward.from_config`, the one builder of ``cooper train`` and the drop-in."""

    rm: RewardModel | None
    updater: PairwiseUpdater | None
    verify: VerifyFn
    verify_lenient: VerifyFn
    negatives: NegativeWriter | None = None  # the assistant (rm_update.negatives assistant/both)
    judge: RolloutJudge | None = None  # reward.judge_rejected or rm_update.labels=judge
    replay: Sequence[Pair] = ()  # the reward model's own rows (rm_update.replay)
    observer: GoldObserver | None = None  # the testbeds' gold judge, outside the step
    collective: Collective = field(default_factory=SingleProcess)


class CooperReward:
    """Rewards for the policy and the online reward-model update, for one training process.

    Build it with :meth:`from_config` from ``cooper train``'s settings (the drop-in builds
    those settings from its keywords): every setting is checked there, once, with
    :class:`~cooper.config.engine.ConfigError` naming the fix, and the parts it names are built.
    """

    def __init__(self, cfg: TrainConfig, parts: Parts):
        plan, u = cfg.plan(), cfg.rm_update
        self.plan, self.parts = plan, parts
        self.rm, self.updater, self.verify = parts.rm, parts.updater, parts.verify
        self.verify_lenient, self.collective = parts.verify_lenient, parts.collective
        self.judge, self.observer = parts.judge, parts.observer
        self.judge_rejected = cfg.reward.judge_rejected
        self.judge_labels = plan.stage2 is Stage2.UPDATE and u.labels == "judge"
        self.negatives = parts.negatives if plan.stage2 is not Stage2.OFF else None
        self.from_rollouts = plan.stage2 is not Stage2.OFF and u.negatives in ("rollouts", "both")
        self.negatives_per_positive = u.negatives_per_positive
        self.positives_per_prompt, self.positive_choice = u.positives_per_prompt, u.positive_choice
        # the loss a frozen reward model is measured with: the one the update would minimise
        self.objective = pair_objective(u.loss, margin=u.margin, anchor_weight=u.anchor_weight)
        self.score_batch_size, self.seed = cfg.reward.score_batch_size, cfg.seed
        # a reward model that only watches (rule mode) watches every Nth training step: what it
        # computes never reaches the policy, so the policy trains exactly as with N = 1
        self.monitor_every = cfg.reward.monitor_every if plan.pays is Payer.VERIFIER else 1
        updating = plan.stage2 is Stage2.UPDATE
        self.replay = Replay(parts.replay, u.replay if updating else 0, seed=cfg.seed)
        self.rollout_forms = u.rollout_forms if updating else 0
        # an endpoint's negatives are written while the policy updates: Stage 2 then waits for
        # the policy's step instead of running right after Stage 1
        self.background = self.negatives is not None and cfg.background_negatives()
        self._executor = ThreadPoolExecutor(1, "cooper-negatives") if self.background else None
        self._pending: Pending | None = None
        # a reward model that is never updated here gives the same logit for the same text:
        # remember them (rm.memo); Cooper's is updated every step, so it has none
        self.memo = (LogitMemo() if plan.scores_with_rm and plan.stage2 is not Stage2.UPDATE
                     else None)

    @classmethod
    def from_config(cls, cfg: TrainConfig, *, rm: RewardModel | None,
                    updater: PairwiseUpdater | None, collective: Collective | None = None,
                    verify: VerifyFn | None = None, verify_lenient: VerifyFn | None = None,
                    negatives: Any = _BUILD, judge: Judge | None = None,
                    replay: Sequence[Pair] | None = None, reference: Any = None
                    ) -> CooperReward:
        """The one builder (``cooper train`` and the TRL drop-in): checks ``cfg``'s reward
        settings (resolved for its mode) and builds each part they name that the caller did
        not give: the verifier, the assistant (``reference``: the frozen reference policy a
        local assistant writes with), the judge (from ``judge.*``, or around a given
        :class:`~cooper.labelling.judge.Judge`), the replayed rows and, on the testbeds, the
        gold observer (``replay``: the pool of ``rm_update.replay``, built from
        ``rm_update.replay_file`` unless given)."""
        cfg.check_reward(has_rm=rm is not None, has_judge=judge is not None)
        u, timeout = cfg.rm_update, cfg.reward.verifier_timeout_s
        verify = verify or partial(verify_batch, mode=cfg.reward.verifier_mode, timeout_s=timeout)
        if negatives is _BUILD:
            negatives = None
            if cfg.uses_assistant():
                from cooper.rl.negatives import negative_writer

                negatives = negative_writer(cfg.assistant, verify, max_attempts=u.max_attempts,
                                            dtype=cfg.policy.dtype, reference=reference)
        collective = collective or SingleProcess()
        judge = rollout_judge(cfg.judge, asked=cfg.reward.judge_rejected or u.labels == "judge",
                              seed=cfg.seed, dtype=cfg.policy.dtype, judge=judge,
                              collective=collective)
        observer = (GoldObserver(verifier_is_gold=cfg.reward.verifier_mode == "gold",
                                 trigger=cfg.judge.trigger)
                    if cfg.validation.judge == "gold" else None)
        lenient = verify_lenient or partial(verify_batch, mode="lenient", timeout_s=timeout)
        return cls(cfg, Parts(rm, updater, verify, lenient, negatives, judge,
                              replay_pairs(u) if replay is None else replay, observer, collective))

    @property
    def pending(self) -> bool:
        """Stage 1 prepared an update that Stage 2 has not run yet."""
        return self._pending is not None

    # ------------------------------------------------------------------ Stage 1

    def score(self, problem_ids: Sequence[str], questions: Sequence[str],
              references: Sequence[str], completions: Sequence[str], *, step: int,
              training: bool = True) -> tuple[list[Rollout], RolloutStats, dict[str, float]]:
        """Verify and score this process's rollouts; in training, prepare Stage 2.

        Returns the rollouts (in input order), statistics over *all* processes' rollouts, and
        the seconds each part took.
        """
        seconds: dict[str, float] = {}
        # 1. the verifier's verdicts (precise; the reward in rule mode, positives in all modes)
        t = time.perf_counter()
        verdicts = self.verify(completions, references)
        seconds["verify"] = time.perf_counter() - t
        timeouts = sum(v.reason == "timeout" for v in verdicts)
        if timeouts:  # counted wrong: a positive lost, or a "negative" that may be right
            log.warning("step %d: %d of %d rollouts timed out in the verifier (even after a "
                        "retry where the machine was busy) and count as wrong; a loaded "
                        "machine makes such a run differ from an idle one", step, timeouts,
                        len(verdicts))
        # 2. the current reward model's probabilities (the reward in rm and cooper modes)
        scores: list[float | None] = [None] * len(completions)
        if self.plan.scores_with_rm and (not training or step % self.monitor_every == 0):
            t = time.perf_counter()
            # with the lower layers frozen, Stage 2 reuses what this pass computes below the
            # trained ones (PairwiseUpdater.keeping_states)
            keep = (self.updater.keeping_states() if training and self.plan.stage2 is Stage2.UPDATE
                    else contextlib.nullcontext())
            with keep:
                scores = self.rm.score([Triple(q, r, c) for q, r, c in
                                        zip(questions, references, completions, strict=True)],
                                       batch_size=self.score_batch_size, memo=self.memo)
            seconds["rm_score"] = time.perf_counter() - t
        rollouts = [Rollout(str(pid), q, ref, c, bool(v.correct), v.extracted, s)
                    for pid, q, ref, c, v, s in zip(problem_ids, questions, references,
                                                    completions, verdicts, scores, strict=True)]
        # 3. the step's rollouts from every process (with ``reward.judge_rejected`` the judge
        # decides what the rule rejects, and its yes pays; in evaluation no new call), each
        # paid once
        everyone = self.collective.gather_objects(rollouts)
        judged = None
        if self.judge_rejected:
            t = time.perf_counter()
            rollouts, everyone, judged = self.judge.pay_rejected(rollouts, everyone, ask=training)
            seconds["judge"] = time.perf_counter() - t
        stage2 = (training and self.plan.stage2 is not Stage2.OFF
                  and step % self.monitor_every == 0)
        labelled = None
        if self.plan.verdicts_pay:  # reward.judge_pays: the judge is asked before the pay
            if stage2:
                labelled = self.judge.label_rejections(everyone, step)
            rollouts, everyone = (self.judge.with_known_verdicts(rs) for rs in (rollouts, everyone))
        everyone = self._paid(everyone)
        # pay is per rollout: with one process this process's rollouts are the step's
        rollouts = everyone if self.collective.world_size == 1 else self._paid(rollouts)
        # ... then the positives and this process's share of the pairs (Stage 2 takes them)
        if stage2:
            self._prepare_stage2(everyone, step, labelled)
        paid = [r.paid for r in everyone]
        stats = replace(rollout_stats(everyone, paid if self.plan.pays is Payer.HYBRID else None),
                        verifier_timeouts=timeouts, judge=judged)
        if self.observer is not None:  # the testbeds: what the rule missed, as gold sees it
            stats = replace(stats, blind_spot=self.observer.blind_spot(everyone, paid))
        return rollouts, stats, seconds

    def _paid(self, rollouts: Sequence[Rollout]) -> list[Rollout]:
        return [replace(r, paid=p) for r, p in zip(rollouts, pay(rollouts, self.plan), strict=True)]

    @staticmethod
    def rewards(rollouts: Sequence[Rollout]) -> list[float]:
        """The policy's reward per rollout, as :meth:`score` paid it (:func:`cooper.rl.pay.pay`)."""
        return [r.paid for r in rollouts]

    def _prepare_stage2(self, everyone: list[Rollout], step: int,
                        labelled: tuple[list[Rollout], JudgeRound] | None = None) -> None:
        rng = random.Random(f"{self.seed}:{step}:positives")
        pool, judged, agreement = everyone, None, None
        if self.judge_labels:  # the judge's labels where the rule's "no" says nothing (asked
            # already, before the pay, when its verdicts pay: reward.judge_pays)
            pool, judged = labelled or self.judge.label_rejections(everyone, step)
            if self.observer is not None:
                agreement = self.observer.judge_agreement(pool)
        positives = select_positives(pool, self.positives_per_prompt, self.positive_choice, rng)
        mine = shard(positives, self.collective.rank, self.collective.world_size)
        rollout_pairs, ambiguous = (self._rollout_pairs(mine, pool) if self.from_rollouts
                                    else ([], 0))
        # the forms a policy can reach, cut from the step's right rollouts (cooper.rl.forms)
        forms = rollout_form_pairs(positives, self.rollout_forms,
                                   random.Random(f"{self.seed}:{step}:forms"))
        replay = shard(self.replay.draw(step) + forms, self.collective.rank,
                       self.collective.world_size)
        written = None
        if self.negatives is not None:
            seed = self.seed * 1_000_003 + step * 1009 + self.collective.rank

            def write() -> tuple[list[NegativeOutcome], float]:
                t = time.perf_counter()
                outcomes = self.negatives.write(mine, seed=seed)
                return outcomes, time.perf_counter() - t

            # an endpoint assistant works in the background while the policy updates
            written = self._executor.submit(write) if self._executor else write
        self._pending = Pending(step, mine, len(positives), rollout_pairs, ambiguous, written,
                                 replay, judged, agreement)

    def _rollout_pairs(self, positives: list[Rollout],
                       everyone: list[Rollout]) -> tuple[list[Pair], int]:
        """Each positive with its prompt's wrong rollouts, hardest first. A rollout the strict
        verifier calls wrong but the lenient reading (its last number) calls correct is a
        correct answer written without a box, not a mistake: it is never a negative, and is
        counted (the returned int); so is one whose lenient check timed out or failed."""
        groups = group_by_problem(everyone)
        candidates = list({r.completion: r for p in positives for r in groups[p.problem_id]
                           if not r.correct}.values())
        # with judged labels every negative left is the judge's or a "no" the rule read: the
        # judge replaces the lenient guard
        untrusted: set[tuple[str, str]] = set()
        if not self.judge_labels:
            verdicts = self.verify_lenient([r.completion for r in candidates],
                                           [r.reference for r in candidates])
            # a check that timed out or failed decided nothing: such a rollout is not taught as
            # wrong
            untrusted = {(r.problem_id, r.completion)
                         for r, v in zip(candidates, verdicts, strict=True)
                         if v.correct or v.reason in ("timeout", "error")}
        pairs = []
        for p in positives:
            excluded = {c for pid, c in untrusted if pid == p.problem_id}
            for n in rollout_negatives(p, groups[p.problem_id], self.negatives_per_positive,
                                       excluded):
                pairs.append(Pair(p.problem_id, p.question, p.reference, p.completion,
                                  n.completion, "rollout"))
        return pairs, len(untrusted)

    # ------------------------------------------------------------------ Stage 2

    def update(self) -> Stage2Stats | None:
        """Negatives and the reward-model update for the step prepared by :meth:`score`."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        c = self.collective
        # 4. negatives written from the positives: assistant, verified wrong; else fallback
        t = time.perf_counter()
        outcomes: list[NegativeOutcome] = []
        seconds_working = 0.0
        if pending.negatives is not None:
            outcomes, seconds_working = (pending.negatives.result()
                                         if isinstance(pending.negatives, Future)
                                         else pending.negatives())
        seconds_negatives = time.perf_counter() - t  # what the step waited for
        written = build_pairs(pending.positives, outcomes) if outcomes else []
        pairs = pending.rollout_pairs + written + pending.replay
        paired = {p.positive for p in pairs}
        for p, o in zip(pending.positives, outcomes, strict=False):
            if o.negative is None:  # the log says why
                log.info("step %d: no negative written for %s after %d attempts (%s)",
                         pending.step, p.problem_id, o.attempts, o.reason)
        local = [len(pairs), len(pending.rollout_pairs), len(written),
                 sum(o.negative is not None and not o.fallback for o in outcomes),
                 sum(o.fallback for o in outcomes), pending.ambiguous,
                 sum(p.completion not in paired for p in pending.positives), len(pending.replay),
                 sum(p.negative_source.startswith("form:") for p in pending.replay)]
        (total_pairs, from_rollouts, from_positives, valid, fallback, ambiguous,
         dropped, replayed, forms) = (int(x) for x in c.sum_floats(local))
        # 5. the pairwise update over the pairs of every process
        t = time.perf_counter()
        loss = acc = grad_norm = changed = None
        updated = skipped = False
        if total_pairs:
            pos = [Triple(p.question, p.reference, p.positive) for p in pairs]
            neg = [Triple(p.question, p.reference, p.negative) for p in pairs]
            if self.plan.stage2 is Stage2.UPDATE:
                st = self.updater.step(pos, neg, reduce_grads=c.all_reduce_sum_,
                                       global_pairs=total_pairs)
                # this process's mean loss and accuracy (NaN without local pairs) -> global sums
                loss_sum, right = c.sum_floats([st.loss * st.pairs if st.pairs else 0.0,
                                                st.pair_acc_before * st.pairs if st.pairs else 0.0])
                grad_norm, skipped, updated = st.grad_norm, st.skipped, not st.skipped
                changed = st.changed_fraction  # the same on every process: identical weights
            else:
                loss_sum, right = c.sum_floats(self._measure_pairs(pos, neg))
            loss, acc = loss_sum / total_pairs, right / total_pairs
        return Stage2Stats(
            positives=pending.total_positives, pairs=total_pairs, pairs_rollout=from_rollouts,
            pairs_assistant=from_positives, valid_negatives=valid, fallback_negatives=fallback,
            negatives_ambiguous=ambiguous, dropped=dropped, loss=loss, pair_acc_before=acc,
            grad_norm=grad_norm, updated=updated, skipped_nonfinite=skipped,
            seconds_negatives=seconds_negatives, seconds_negatives_total=seconds_working,
            seconds_update=time.perf_counter() - t, changed_fraction=changed,
            pairs_replay=replayed - forms, pairs_forms=forms, judge=pending.judge,
            judge_gold_agreement=pending.judge_gold_agreement)

    def _measure_pairs(self, pos: list[Triple], neg: list[Triple]) -> list[float]:
        """(summed loss, pairs ranked right) of the frozen reward model: the same objective on
        the same eval-mode logits as the update's first pass. The logits are those of scoring
        (each distinct input once; a positive is a rollout just scored, so the memo has it)."""
        import torch

        logits = torch.tensor(self.rm.raw_logits([*pos, *neg], batch_size=self.score_batch_size,
                                                 memo=self.memo))  # [2P]
        lp, ln = logits[:len(pos)], logits[len(pos):]  # [P], [P]
        return [self.objective(lp, ln, 1.0).item(), float((lp > ln).sum())]

    def source_metrics(self) -> dict[str, float]:
        """Counters of the negative sources and the judge that keep any (an endpoint's requests,
        retries, failures by kind, circuit-breaker state; the judge's calls over the run)."""
        out = self.negatives.metrics() if self.negatives is not None else {}
        if self.judge is not None:
            out.update({**self.judge.metrics(), "judge/calls_total": float(self.judge.calls)})
        return out

    def close(self) -> None:
        if self._executor:
            self._executor.shutdown(wait=True)
        if self.negatives is not None:
            self.negatives.close()
        if self.judge is not None:
            self.judge.close()

"""The online reward of Cooper: Stage 1 scores the rollouts, Stage 2 updates the reward model.

This module knows nothing about the RL framework; :mod:`cooper.rl.trainer` wires it into TRL.
One RL step (``method.md``, Part 2) as it happens here:

Stage 1, :meth:`CooperReward.score` (when the policy's rewards are computed):
  1. verify every completion against the reference (rule-based, precise);
  2. score every completion with the *current* reward model: that is the policy's reward in the
     ``rm`` and ``cooper`` modes, the verdict is the reward in ``rule`` mode;
  3. gather the step's rollouts from every process, pick positives, and hand each process its
     share; an endpoint assistant starts writing negatives now, in the background, so that its
     network time overlaps the policy update instead of blocking it.

Stage 2, :meth:`CooperReward.update` (after the policy's optimiser step, so this step's rewards
came from the reward model *before* its update):
  4. negatives: assistant proposals that the verifier confirms wrong, else the rule-based
     fallback, else the pair is dropped;
  5. the pairwise (Bradley-Terry) update of the reward model, gradients summed across processes.
     In ``rule`` and ``rm`` modes the reward model is not updated, but the same pairs still
     measure it (``rm/pair_acc_before``): the hacking signal of a frozen reward model.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cooper.config.train import Payer, Stage2, TrainConfig
from cooper.infra.collective import Collective, SingleProcess
from cooper.rl.negatives import NegativeOutcome, NegativeWriter, build_pairs
from cooper.rl.pairs import RolloutStats, rollout_stats, select_positives, shard
from cooper.rm.losses import pairwise_loss
from cooper.types import Rollout, Triple

if TYPE_CHECKING:
    from cooper.rm.model import RewardModel
    from cooper.rm.update import PairwiseUpdater

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage2Stats:
    """What one reward-model update did (logged under ``rm/`` and ``perf/``)."""

    positives: int  # over all processes
    pairs: int  # valid pairs over all processes
    valid_negatives: int  # accepted negatives from the configured source
    fallback_negatives: int  # accepted negatives from the fallback (pairs = valid + fallback)
    dropped: int  # positives without an acceptable negative
    loss: float | None  # pairwise loss before the update (None: no pairs)
    pair_acc_before: float | None  # pairs ranked right before the update
    grad_norm: float | None
    updated: bool  # the reward model's weights changed
    skipped_nonfinite: bool  # a non-finite loss or gradient norm skipped the step
    seconds_negatives: float  # the step waited this long for its negatives
    seconds_negatives_total: float  # the negatives took this long (more when run in background)
    seconds_update: float


@dataclass
class _Pending:
    """Stage 1's hand-over to Stage 2."""

    step: int
    positives: list[Rollout]  # this process's share
    total_positives: int
    negatives: Future | Callable[[], tuple[list[NegativeOutcome], float]]
    started: float = field(default_factory=time.perf_counter)


class CooperReward:
    """Rewards for the policy and the online reward-model update, for one training process.

    Built from the run's settings (:class:`~cooper.config.train.TrainConfig`; what pays the
    policy and what Stage 2 does come from :meth:`~cooper.config.train.TrainConfig.plan`) and
    the parts they name: the reward model and its updater, the verifier and the negatives.
    """

    def __init__(self, cfg: TrainConfig, *, rm: RewardModel | None,
                 updater: PairwiseUpdater | None,
                 verify: Callable[[Sequence[str], Sequence[str]], list],
                 negatives: NegativeWriter | None = None, collective: Collective | None = None):
        plan = cfg.plan()
        if plan.scores_with_rm and rm is None:
            raise ValueError(f"reward.mode={cfg.reward.mode} needs a reward model")
        if plan.stage2 is Stage2.UPDATE and updater is None:
            raise ValueError("a reward-model update needs a PairwiseUpdater")
        if plan.stage2 is not Stage2.OFF and negatives is None:
            raise ValueError(f"Stage 2 ({plan.stage2.value}) needs a NegativeWriter")
        self.plan, self.rm, self.updater, self.verify = plan, rm, updater, verify
        self.negatives = negatives
        u = cfg.rm_update
        self.positives_per_prompt, self.positive_choice = u.positives_per_prompt, u.positive_choice
        self.score_batch_size, self.seed = cfg.reward.score_batch_size, cfg.seed
        self.collective = collective or SingleProcess()
        self._executor = (ThreadPoolExecutor(1, "cooper-negatives")
                          if plan.stage2 is not Stage2.OFF and cfg.background_negatives() else None)
        self._pending: _Pending | None = None

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
        # 2. the current reward model's probabilities (the reward in rm and cooper modes)
        scores: list[float | None] = [None] * len(completions)
        if self.plan.scores_with_rm:
            t = time.perf_counter()
            scores = self.rm.score([Triple(q, r, c) for q, r, c in
                                    zip(questions, references, completions, strict=True)],
                                   batch_size=self.score_batch_size)
            seconds["rm_score"] = time.perf_counter() - t
        rollouts = [Rollout(str(pid), q, ref, c, bool(v.correct), v.extracted, s)
                    for pid, q, ref, c, v, s in zip(problem_ids, questions, references,
                                                    completions, verdicts, scores, strict=True)]
        # 3. the step's rollouts from every process, and this process's share of positives
        everyone = self.collective.gather_objects(rollouts)
        if training and self.plan.stage2 is not Stage2.OFF:
            self._prepare_stage2(everyone, step)
        return rollouts, rollout_stats(everyone), seconds

    def rewards(self, rollouts: Sequence[Rollout]) -> list[float]:
        """The policy's reward per rollout: the verdict, or the reward model's probability.

        A non-finite reward-model score becomes NaN, which the trainer treats as unscorable
        (zero advantage) instead of letting it poison the group's normalisation.
        """
        if self.plan.pays is Payer.VERIFIER:
            return [float(r.correct) for r in rollouts]
        return [r.rm_score if r.rm_score is not None and math.isfinite(r.rm_score) else math.nan
                for r in rollouts]

    def _prepare_stage2(self, everyone: list[Rollout], step: int) -> None:
        rng = random.Random(f"{self.seed}:{step}:positives")
        positives = select_positives(everyone, self.positives_per_prompt, self.positive_choice, rng)
        mine = shard(positives, self.collective.rank, self.collective.world_size)
        seed = self.seed * 1_000_003 + step * 1009 + self.collective.rank

        def job() -> tuple[list[NegativeOutcome], float]:
            t = time.perf_counter()
            outcomes = self.negatives.write(mine, seed=seed)
            return outcomes, time.perf_counter() - t

        # an endpoint assistant works in the background while the policy updates
        negatives = self._executor.submit(job) if self._executor else job
        self._pending = _Pending(step, mine, len(positives), negatives)

    # ------------------------------------------------------------------ Stage 2

    def update(self) -> Stage2Stats | None:
        """Negatives and the reward-model update for the step prepared by :meth:`score`."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        c = self.collective
        # 4. negatives for this process's positives: assistant, verified wrong; else fallback
        t = time.perf_counter()
        outcomes, seconds_working = (pending.negatives.result()
                                     if isinstance(pending.negatives, Future)
                                     else pending.negatives())
        seconds_negatives = time.perf_counter() - t  # what the step waited for
        pairs = build_pairs(pending.positives, outcomes)
        for p, o in zip(pending.positives, outcomes, strict=True):
            if o.negative is None:  # counted in rm/dropped_pairs; the log says why
                log.info("step %d: no negative for %s after %d attempts (%s); pair dropped",
                         pending.step, p.problem_id, o.attempts, o.reason)
        local = [len(pairs), sum(o.negative is not None and not o.fallback for o in outcomes),
                 sum(o.fallback for o in outcomes), sum(o.negative is None for o in outcomes)]
        total_pairs, valid, fallback, dropped = (int(x) for x in c.sum_floats(local))
        # 5. the pairwise update over the valid pairs of every process
        t = time.perf_counter()
        loss = acc = grad_norm = None
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
            else:
                loss_sum, right = c.sum_floats(self._measure_pairs(pos, neg))
            loss, acc = loss_sum / total_pairs, right / total_pairs
        return Stage2Stats(pending.total_positives, total_pairs, valid, fallback, dropped, loss,
                           acc, grad_norm, updated, skipped, seconds_negatives, seconds_working,
                           time.perf_counter() - t)

    def _measure_pairs(self, pos, neg) -> list[float]:
        """(sum of pairwise losses, pairs ranked right) without changing the reward model."""
        import torch

        if not pos:
            return [0.0, 0.0]
        with torch.inference_mode():
            lp, ln = self.rm.logits(pos), self.rm.logits(neg)  # [P], [P]
            loss = pairwise_loss(lp, ln).item() * len(pos)
        return [loss, float((lp > ln).sum().item())]

    def source_metrics(self) -> dict[str, float]:
        """Counters of the negative sources that keep any (an endpoint's requests, retries,
        failures by kind, circuit-breaker state)."""
        return self.negatives.metrics() if self.negatives is not None else {}

    def close(self) -> None:
        if self._executor:
            self._executor.shutdown(wait=True)
        if self.negatives is not None:
            self.negatives.close()

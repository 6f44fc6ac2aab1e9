"""The records Stage 2 of the Cooper step passes on: :class:`Pending`, what Stage 1 hands it
(the step's positives, the pairs already made from its rollouts and the negatives being written),
and :class:`Stage2Stats`, what one reward-model update did (logged under ``rm/`` and ``perf/`` by
:func:`cooper.rl.step_metrics.stage2_metrics`). :class:`cooper.rl.step.CooperReward` fills both;
they live here so that the step reads as the method and what reads its statistics need not
import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cooper.types import Pair, Rollout

if TYPE_CHECKING:
    from cooper.rl.judging import JudgeRound
    from cooper.rl.negatives import NegativeOutcome


@dataclass(frozen=True, kw_only=True)
class Stage2Stats:
    """What one reward-model update did (logged under ``rm/`` and ``perf/``)."""

    positives: int  # over all processes
    pairs: int  # valid pairs over all processes (rollout + assistant)
    pairs_rollout: int  # pairs whose negative is one of the prompt's wrong rollouts
    pairs_assistant: int  # pairs whose negative was written from the positive (assistant or fallback)
    valid_negatives: int  # accepted negatives from the configured assistant
    fallback_negatives: int  # accepted negatives from the fallback
    negatives_ambiguous: int  # wrong rollouts not used: the lenient reading finds them correct
    dropped: int  # positives that got no pair at all
    loss: float | None  # pairwise loss before the update (None: no pairs)
    pair_acc_before: float | None  # pairs ranked right before the update
    grad_norm: float | None
    updated: bool  # the reward model's weights changed
    skipped_nonfinite: bool  # a non-finite loss or gradient norm skipped the step
    seconds_negatives: float  # the step waited this long for its negatives
    seconds_negatives_total: float  # the negatives took this long (more when run in background)
    seconds_update: float
    changed_fraction: float | None = None  # trainable weights the update moved (None: no update)
    pairs_replay: int = 0  # pairs of the reward model's own labelled training rows
    pairs_forms: int = 0  # reachable-form pairs cut from the step's right rollouts
    judge: JudgeRound | None = None  # the judge asked where the rule's "no" said nothing
    judge_gold_agreement: float | None = None  # its labels that the gold judge shares


@dataclass
class Pending:
    """Stage 1's hand-over to Stage 2."""

    step: int
    positives: list[Rollout]  # this process's share
    total_positives: int
    rollout_pairs: list[Pair]  # this process's pairs with rollout negatives
    ambiguous: int  # candidate rollouts the lenient guard kept out
    negatives: Future | Callable[[], tuple[list[NegativeOutcome], float]] | None  # assistant
    replay: list[Pair] = field(default_factory=list)  # this process's replayed rows
    judge: JudgeRound | None = None
    judge_gold_agreement: float | None = None
    started: float = field(default_factory=time.perf_counter)

"""Stage 2 data: the step's rollouts, positive selection and preference pairs (pure functions,
but for reading the replayed rows' file).

Cooper (``docs/method.md`` "One Cooper step", step 3) turns one RL step's rollouts into reward-model
training pairs. Positives are completions the rule-based verifier confirms correct, because the
verifier is *precise*: when it says "correct" it is almost always right. The released code takes the
first correct completion of each prompt, at most one pair per prompt per step; prompts with no
verified-correct completion contribute no pair. Negatives are written from a positive by an
assistant (:mod:`cooper.rl.negatives`; accepted only when the verifier finds a final answer that is
*not* equivalent to the reference), or taken from the same prompt's wrong rollouts
(:func:`rollout_negatives`, the method summary's variant). The step's statistics include the
calibration-free hacking metrics (:func:`~cooper.rl.groups.top_wrong`,
:func:`~cooper.rl.groups.group_auroc`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cooper.data.triples import load_triples
from cooper.errors import UserError
from cooper.rl.groups import group_auroc, group_by_problem, top_wrong
from cooper.types import LabelledTriple, Pair, Rollout

if TYPE_CHECKING:
    from cooper.config.reward_sections import RMUpdateConfig
    from cooper.rl.blind_spot import BlindSpotStats
    from cooper.rl.judging import JudgeRound


def select_positives(rollouts: Sequence[Rollout], per_prompt: int = 1, choice: str = "first",
                     rng: random.Random | None = None) -> list[Rollout]:
    """Up to ``per_prompt`` verified-correct completions of each problem.

    ``first`` follows the released code (the first correct sample, in sampling order);
    ``random`` draws without replacement with ``rng``. Identical completions of one problem count
    once: two copies of the same text would make two identical pairs.
    """
    if per_prompt < 1:
        raise ValueError(f"per_prompt must be >= 1, got {per_prompt}")
    if choice not in ("first", "random"):
        raise ValueError(f"choice must be 'first' or 'random', got {choice!r}")
    positives: list[Rollout] = []
    for group in group_by_problem(rollouts).values():
        seen: set[str] = set()
        correct = []
        for r in group:
            if r.correct and r.completion not in seen:
                seen.add(r.completion)
                correct.append(r)
        if choice == "random" and len(correct) > per_prompt:
            correct = (rng or random.Random(0)).sample(correct, per_prompt)
        positives.extend(correct[:per_prompt])
    return positives


def rollout_negatives(positive: Rollout, group: Sequence[Rollout], k: int,
                      excluded: Iterable[str] = ()) -> list[Rollout]:
    """Up to ``k`` negatives for ``positive`` from its own group: the rollouts the verifier
    judges wrong, hardest first (highest reward-model score, sampling order among equals and
    unscored ones last), each text once, ``excluded`` texts left out (rollouts whose wrong
    verdict is not trusted, see :func:`cooper.rl.step`'s lenient guard)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    skip = set(excluded) | {positive.completion}
    seen: set[str] = set()
    wrong = []
    for r in group:
        if not r.correct and r.problem_id == positive.problem_id and r.completion not in skip \
                and r.completion not in seen:
            seen.add(r.completion)
            wrong.append(r)

    def hardness(r: Rollout) -> float:
        return r.rm_score if r.rm_score is not None and math.isfinite(r.rm_score) else -math.inf

    return sorted(wrong, key=hardness, reverse=True)[:k]  # sorted() is stable: ties keep order


def replay_pool(rows: Iterable[LabelledTriple]) -> list[Pair]:
    """Pairs from labelled rows (the reward model's own training data, ``rm_update.replay``):
    for each (question, reference), its right and wrong solutions paired in file order, each
    row in one pair at most."""
    groups: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for row in rows:
        t = row.triple
        right, wrong = groups.setdefault((t.question, t.reference), ([], []))
        (right if row.label else wrong).append(t.completion)
    return [Pair(f"replay:{q}", q, ref, pos, neg, "replay")
            for (q, ref), (right, wrong) in groups.items()
            for pos, neg in zip(right, wrong, strict=False)]


def replay_pairs(update: RMUpdateConfig) -> list[Pair]:
    """The pairs ``rm_update.replay`` draws from (:func:`replay_pool` of
    ``rm_update.replay_file``); none when replay is off."""
    if not update.replay:
        return []
    pool = replay_pool(load_triples(update.replay_file).rows)
    if not pool:
        raise UserError(f"rm_update.replay_file={update.replay_file} holds no right and wrong "
                        "solution of one problem to pair: give the labelled rows the reward "
                        "model was trained on, or set rm_update.replay=0")
    return pool


def shard(items: Sequence, rank: int, world_size: int) -> list:
    """Items ``rank, rank + world_size, ...``: each process handles a disjoint slice."""
    return list(items[rank::world_size])


@dataclass(frozen=True)
class RolloutStats:
    """What the step's rollouts say about the reward (``reward/*``, ``hacking/*``, ``rm/*``;
    each defined in ``docs/metrics.md``)."""

    rule_mean: float  # verified accuracy of the rollouts
    rm_mean: float | None  # mean reward-model probability over finite scores
    gap: float | None  # rm_mean minus the verified accuracy of the same (finite-scored) rollouts
    agreement: float | None  # fraction where (rm > 0.5) == verifier
    top_wrong: float | None  # groups with a correct rollout whose top-scored one is wrong
    group_auroc: float | None  # reward model vs verifier within mixed groups, averaged
    problems_with_positive: int
    problems: int
    nonfinite_scores: int  # reward-model scores that were NaN or infinite
    verifier_timeouts: int = 0  # this process's rollouts whose check timed out (counted wrong)
    hybrid_mean: float | None = None  # the mean of what the hybrid reward paid, where finite
    rm_wrong_mean: float | None = None  # mean probability over the finite-scored wrong rollouts
    blind_spot: BlindSpotStats | None = None  # what the rule missed (gold judge only)
    judge: JudgeRound | None = None  # the judge asked about the rule's rejections (pays)


def rollout_stats(rollouts: Sequence[Rollout], paid: Sequence[float] | None = None
                  ) -> RolloutStats:
    """The step's figures; ``paid``: what a hybrid reward paid each rollout
    (:meth:`cooper.rl.step.CooperReward.rewards`), whose finite mean is ``hybrid_mean``."""
    if not rollouts:
        raise ValueError("no rollouts")
    rule = [float(r.correct) for r in rollouts]
    scored = [r for r in rollouts if r.rm_score is not None and math.isfinite(r.rm_score)]
    groups = group_by_problem(rollouts)
    rm_mean = sum(r.rm_score for r in scored) / len(scored) if scored else None
    # the reward as paid, not recomputed here: with reward.hybrid_scores=unread a rejection
    # the rule read pays 0, not the score (a NaN pays nothing: the trainer drops it)
    hybrid = [x for x in paid if math.isfinite(x)] if paid is not None else []
    return RolloutStats(
        rule_mean=sum(rule) / len(rule),
        rm_mean=rm_mean,
        # both means over the same rollouts: a NaN score drops its verdict too
        gap=rm_mean - sum(r.correct for r in scored) / len(scored) if scored else None,
        agreement=(sum((r.rm_score > 0.5) == r.correct for r in scored) / len(scored)
                   if scored else None),
        top_wrong=top_wrong(groups.values()),
        group_auroc=group_auroc(groups.values()),
        problems_with_positive=sum(any(r.correct for r in g) for g in groups.values()),
        problems=len(groups),
        nonfinite_scores=sum(r.rm_score is not None and not math.isfinite(r.rm_score)
                             for r in rollouts),
        hybrid_mean=sum(hybrid) / len(hybrid) if scored and hybrid else None,
        rm_wrong_mean=_mean([r.rm_score for r in scored if not r.correct]))


def _mean(v: list[float]) -> float | None:
    return sum(v) / len(v) if v else None

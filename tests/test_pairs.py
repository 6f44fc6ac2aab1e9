"""Positive selection, sharding and rollout statistics, with hand-worked numbers."""

from __future__ import annotations

import math
import random

import pytest

from cooper.rl.pairs import rollout_stats, select_positives, shard
from cooper.types import Rollout


def R(pid, text, correct, score=None):
    return Rollout(pid, f"q{pid}", "5", text, correct, "5" if correct else "4", score)


ROLLOUTS = [
    R("a", "a1", False), R("a", "a2", True), R("a", "a3", True),   # a: first correct is a2
    R("b", "b1", False), R("b", "b2", False),                        # b: no positive, no pair
    R("c", "c1", True), R("c", "c1", True), R("c", "c3", True),     # c: duplicate text counts once
]


def test_first_correct_per_prompt_like_the_released_code():
    pos = select_positives(ROLLOUTS)
    assert [(p.problem_id, p.completion) for p in pos] == [("a", "a2"), ("c", "c1")]


def test_several_positives_per_prompt_skip_duplicates():
    pos = select_positives(ROLLOUTS, per_prompt=2)
    assert [p.completion for p in pos] == ["a2", "a3", "c1", "c3"]


def test_random_choice_is_seeded_and_within_the_correct_ones():
    a = select_positives(ROLLOUTS, choice="random", rng=random.Random(1))
    b = select_positives(ROLLOUTS, choice="random", rng=random.Random(1))
    assert a == b and all(p.correct for p in a) and len(a) == 2
    # random, not the first: over seeds every correct rollout of a prompt is picked
    picked = {p.completion for seed in range(40)
              for p in select_positives(ROLLOUTS, choice="random", rng=random.Random(seed))}
    assert picked == {"a2", "a3", "c1", "c3"}


def test_groups_split_across_processes_are_selected_once_gathered():
    # process 0 saw a2 and c1, process 1 saw a3, c1 and c3: each process alone would pick a
    # positive of a and of c, two per prompt; gathered, each prompt gives one
    proc0 = [ROLLOUTS[1], ROLLOUTS[5]]
    proc1 = [ROLLOUTS[2], ROLLOUTS[6], ROLLOUTS[7]]
    alone = select_positives(proc0) + select_positives(proc1)
    assert sorted(p.problem_id for p in alone) == ["a", "a", "c", "c"]
    gathered = select_positives(proc0 + proc1)
    assert [(p.problem_id, p.completion) for p in gathered] == [("a", "a2"), ("c", "c1")]


def test_bad_arguments():
    with pytest.raises(ValueError):
        select_positives(ROLLOUTS, per_prompt=0)
    with pytest.raises(ValueError):
        select_positives(ROLLOUTS, choice="best")


def test_shard_is_disjoint_and_complete():
    items = list(range(7))
    parts = [shard(items, r, 3) for r in range(3)]
    assert parts == [[0, 3, 6], [1, 4], [2, 5]]
    assert sorted(x for p in parts for x in p) == items


def test_rollout_stats_hand_computed():
    rs = [R("a", "1", True, 0.9), R("a", "2", False, 0.8), R("b", "3", False, 0.2),
          R("b", "4", True, 0.4)]
    s = rollout_stats(rs)
    assert s.rule_mean == 0.5
    assert s.rm_mean == pytest.approx((0.9 + 0.8 + 0.2 + 0.4) / 4)  # 0.575
    # rm>0.5 vs verifier: T/T agree, T/F disagree, F/F agree, F/T disagree -> 2/4
    assert s.agreement == 0.5
    assert (s.problems_with_positive, s.problems, s.nonfinite_scores) == (2, 2, 0)
    assert s.rm_wrong_mean == pytest.approx((0.8 + 0.2) / 2)  # what the wrong ones were paid


def test_the_score_of_wrong_rollouts_leaves_nonfinite_scores_and_right_rollouts_out():
    rs = [R("a", "1", True, 0.9), R("a", "2", False, math.nan), R("a", "3", False, 0.3)]
    assert rollout_stats(rs).rm_wrong_mean == 0.3
    assert rollout_stats([R("a", "1", True, 0.9)]).rm_wrong_mean is None  # none wrong
    assert rollout_stats([R("a", "1", False)]).rm_wrong_mean is None  # no reward model scored


def test_rollout_stats_ignore_nonfinite_scores_and_count_them():
    rs = [R("a", "1", True, 0.9), R("a", "2", False, math.nan), R("a", "3", False, math.inf)]
    s = rollout_stats(rs)
    assert s.rm_mean == 0.9 and s.agreement == 1.0 and s.nonfinite_scores == 2
    assert rollout_stats([R("a", "1", True)]).rm_mean is None


def test_the_hybrid_mean_is_the_mean_of_what_was_paid_where_finite():
    # as the hybrid pays them: 1 (verified, its score ignored), 0.8, 0.2, 1 (verified, NaN
    # score still paid 1); the wrong rollout with a NaN score pays nothing and is left out
    rs = [R("a", "1", True, 0.3), R("a", "2", False, 0.8), R("b", "3", False, 0.2),
          R("b", "4", True, math.nan), R("b", "5", False, math.nan)]
    paid = [1.0, 0.8, 0.2, 1.0, math.nan]
    assert rollout_stats(rs, paid).hybrid_mean == pytest.approx((1 + 0.8 + 0.2 + 1) / 4)
    assert rollout_stats(rs).hybrid_mean is None  # nothing paid by a hybrid
    assert rollout_stats([R("a", "1", True)], [1.0]).hybrid_mean is None  # no model scored


def test_gap_compares_the_same_rollouts():
    # the NaN-scored rollout is correct: left out of both means, the gap is 0.9 - 1.0, not
    # 0.9 - 0.5 (its verdict counted, its score not)
    rs = [R("a", "1", True, 0.9), R("a", "2", True, math.nan), R("b", "3", False, 0.1),
          R("b", "4", False, 0.1)]
    s = rollout_stats(rs)
    assert s.gap == pytest.approx((0.9 + 0.1 + 0.1) / 3 - 1 / 3)


def test_top_wrong_and_group_auroc_on_hand_made_groups():
    from cooper.rl.groups import group_auroc, top_wrong

    a = [R("a", "1", True, 0.9), R("a", "2", False, 0.2)]  # right on top
    b = [R("b", "1", True, 0.3), R("b", "2", False, 0.8), R("b", "3", False, 0.1)]  # wrong on top
    c = [R("c", "1", False, 0.9)]  # no correct rollout: not counted
    d = [R("d", "1", True, 0.5), R("d", "2", False, 0.5)]  # a tie: counted as wrong on top
    assert top_wrong([a, b, c, d]) == pytest.approx(2 / 3)
    # AUROC: a 1.0; b: the correct 0.3 beats 0.1, loses to 0.8 -> 0.5; d: tie -> 0.5; c: one
    # class, left out; mean (1 + 0.5 + 0.5) / 3
    assert group_auroc([a, b, c, d]) == pytest.approx(2 / 3)
    assert top_wrong([c]) is None and group_auroc([c]) is None
    s = rollout_stats(a + b + c + d)
    assert s.top_wrong == pytest.approx(2 / 3) and s.group_auroc == pytest.approx(2 / 3)

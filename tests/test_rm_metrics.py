"""Reward-model metrics, each checked against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from cooper.rm.metrics import (
    Confusion,
    auroc,
    balanced_indices,
    binary_metrics,
    expected_calibration_error,
    metrics_by_group,
)

SCORES = [0.9, 0.8, 0.4, 0.3, 0.6, 0.2]
LABELS = [True, True, True, False, False, False]


def test_threshold_metrics_by_hand():
    m = binary_metrics(SCORES, LABELS)
    # verdicts at 0.5: T T F F T F -> tp 2 (0.9, 0.8), fn 1 (0.4), fp 1 (0.6), tn 2
    assert m.confusion == Confusion(tp=2, fp=1, tn=2, fn=1)
    assert m.accuracy == pytest.approx(4 / 6)
    assert m.precision == pytest.approx(2 / 3) and m.recall == pytest.approx(2 / 3)
    assert m.f1 == pytest.approx(2 / 3)
    assert m.n == 6 and m.positives == 3


def test_auroc_by_hand_with_ties():
    # positive/negative pairs ranked right: 0.9 beats 3 negatives, 0.8 beats 3, 0.4 beats 2
    # (0.3, 0.2) -> 8 of 9
    assert auroc(SCORES, LABELS) == pytest.approx(8 / 9)
    # a tie between a positive and a negative counts half: 1 + 0.5 = 1.5 of 2 pairs
    assert auroc([0.5, 0.5, 0.1], [True, False, False]) == pytest.approx(0.75)
    assert math.isnan(auroc([0.1, 0.2], [True, True]))


def test_ece_by_hand():
    # bins of width 0.1: [0.9] label 1 -> |1 - 0.9| = 0.1; [0.8] 1 -> 0.2; [0.4] 1 -> 0.6;
    # [0.3] 0 -> 0.3; [0.6] 0 -> 0.6; [0.2] 0 -> 0.2; each weighs 1/6: sum 2.0 / 6
    assert expected_calibration_error(SCORES, LABELS) == pytest.approx(2.0 / 6)
    # two items in one bin: mean score 0.85, fraction correct 0.5 -> 0.35
    assert expected_calibration_error([0.81, 0.89], [True, False]) == pytest.approx(0.35)
    # a score of exactly 1.0 falls in the last bin
    assert expected_calibration_error([1.0], [True]) == 0.0


def test_undefined_figures_are_zero_or_null():
    m = binary_metrics([0.1, 0.2], [False, False])
    assert m.precision == 0.0 and m.recall == 0.0 and m.f1 == 0.0 and m.accuracy == 1.0
    assert m.to_dict()["auroc"] is None  # JSON has no NaN


def test_per_group():
    by = metrics_by_group(SCORES, LABELS, ["a", "a", "b", "b", "a", "b"])
    assert list(by) == ["a", "b"]
    assert by["a"].n == 3 and by["a"].accuracy == pytest.approx(2 / 3)  # 0.9 T, 0.8 T, 0.6 F
    assert by["b"].accuracy == pytest.approx(2 / 3)  # 0.4 T (wrong), 0.3 F, 0.2 F


def test_mismatched_lengths_fail():
    with pytest.raises(ValueError):
        binary_metrics([0.1], [True, False])


def test_balanced_indices_keep_every_rare_label_and_as_many_of_the_other():
    labels = [True, False, False, True, False, False, False, False]
    keep = balanced_indices(labels, seed=0)
    assert keep == sorted(keep)  # file order
    assert [labels[i] for i in keep].count(True) == 2 == [labels[i] for i in keep].count(False)
    assert {0, 3} <= set(keep)  # every row of the rarer label
    assert balanced_indices(labels, seed=0) == keep  # the seed decides the draw
    assert len({tuple(balanced_indices(labels, seed=s)) for s in range(20)}) > 1
    with pytest.raises(ValueError, match="0 correct and 3 wrong"):
        balanced_indices([False] * 3, seed=0)

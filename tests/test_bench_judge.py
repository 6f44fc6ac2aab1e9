"""`cooper bench judge`: a judge on the rule's rejections, scored by the gold judge."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from cooper.bench.judge import agreement

pytestmark = pytest.mark.smoke  # a whole command on the shipped tiny policy


def test_agreement_with_the_gold_judge_by_hand():
    judged = [True, True, False, None, False, True]
    gold = [True, False, False, True, True, True]
    a = agreement(judged, gold)
    # 5 with a verdict: right on 3 (1, 3, 6); 3 gold-right among them, 2 called right
    assert (a["answers"], a["right"], a["no_verdict"]) == (6, 4, 1)
    assert a["accuracy"] == pytest.approx(3 / 5)
    assert a["recall"] == pytest.approx(2 / 3) and a["specificity"] == pytest.approx(1 / 2)
    assert a["balanced_accuracy"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert agreement([True], [True])["balanced_accuracy"] is None  # one class: undefined


def test_the_gold_judge_agrees_with_itself_and_its_noisy_stand_in_less(tmp_path):
    out = tmp_path / "judge.json"
    run_cli("bench", "judge", "--judge", "gold", "--problems", "30", "--samples", "2",
            "--out", str(out))
    r = json.loads(out.read_text())
    assert r["distinct_rejected_answers"] > 10 and r["rule_rejected"] <= r["samples"]
    assert r["accuracy"] == 1.0 and r["no_verdict"] == 0
    assert set(r["families"]) == {"numbers", "yesno"}
    # every comparison is rejected by the rule, right ones included
    assert r["families"]["yesno"]["right"] > 0
    run_cli("bench", "judge", "--judge", "gold", "--error-rate", "0.3", "--problems", "30",
            "--samples", "2", "--out", str(out))
    noisy = json.loads(out.read_text())
    assert noisy["distinct_rejected_answers"] == r["distinct_rejected_answers"]
    assert noisy["accuracy"] < 1.0


def test_a_flip_rate_is_for_the_gold_judge_only():
    proc = run_cli("bench", "judge", "--error-rate", "0.1", "--problems", "2", check=False)
    assert proc.returncode != 0 and "--error-rate flips the gold judge" in proc.stderr

"""Temperature fitting, reliability bins, the eval tables and the diagram; the temperature saved
with a reward model and applied by `score`."""

from __future__ import annotations

import json
import math
import random

import pytest

from cooper.config.rm import RMTrainConfig
from cooper.errors import UserError
from cooper.rm.calibration import (
    T_MAX,
    apply_temperature,
    fit_temperature,
    nll,
    reliability_bins,
    sigmoid,
)
from cooper.rm.model import RewardModel
from cooper.rm.plot import plot_reliability
from cooper.rm.report import eval_report, format_report
from cooper.rm.training import train_bce
from cooper.types import LabelledTriple, Triple


def _synthetic(true_t: float, n: int = 6000, seed: int = 0):
    """Labels drawn with P(correct) = sigmoid(z); the model's logits are z * true_t, so the
    temperature that undoes the scaling is true_t."""
    rng = random.Random(seed)
    z = [rng.gauss(0, 2) for _ in range(n)]
    labels = [rng.random() < sigmoid(x) for x in z]
    return [x * true_t for x in z], labels


@pytest.mark.parametrize("true_t", [0.25, 1.0, 4.0])
def test_fit_recovers_a_known_temperature(true_t):
    logits, labels = _synthetic(true_t)
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(true_t, rel=0.1)
    # it is the minimum: nudging it either way costs log-likelihood
    assert nll(logits, labels, t) <= min(nll(logits, labels, t * 1.05),
                                         nll(logits, labels, t / 1.05))
    assert nll(logits, labels, t) <= nll(logits, labels, 1.0)


def test_fit_edges():
    # logits that say nothing (each value once correct, once wrong): the best T is infinite,
    # kept at T_MAX; anti-correlated logits too (a negative T would be a retrain, not a fix)
    logits = [-2.0, -2.0, 1.0, 1.0, 3.0, 3.0]
    labels = [True, False] * 3
    assert fit_temperature(logits, labels) == pytest.approx(T_MAX, rel=1e-3)
    assert fit_temperature([2.0, -2.0], [False, True]) == pytest.approx(T_MAX, rel=1e-3)
    with pytest.raises(ValueError, match="both correct and wrong"):
        fit_temperature([1.0, 2.0], [True, True])
    with pytest.raises(ValueError, match="t_min < t_max"):
        fit_temperature([1.0, 2.0], [True, False], t_min=2, t_max=1)


def test_nll_and_sigmoid_by_hand():
    # -log sigmoid(2) = log(1 + e^-2) = 0.126928; -log(1 - sigmoid(2)) = 2.126928
    assert nll([2.0], [True]) == pytest.approx(0.126928, abs=1e-6)
    assert nll([2.0], [False]) == pytest.approx(2.126928, abs=1e-6)
    assert nll([4.0], [False], temperature=2.0) == pytest.approx(2.126928, abs=1e-6)
    assert sigmoid(-800) == 0.0 and sigmoid(800) == 1.0 and sigmoid(0) == 0.5
    assert apply_temperature([2.0, -2.0], 2.0) == [pytest.approx(sigmoid(1)),
                                                   pytest.approx(sigmoid(-1))]


def test_reliability_bins_by_hand():
    scores = [0.05, 0.15, 0.12, 0.95, 1.0, 0.5]
    labels = [False, True, False, True, True, False]
    bins = reliability_bins(scores, labels, bins=10)
    assert [b.n for b in bins] == [1, 2, 0, 0, 0, 1, 0, 0, 0, 2]
    assert bins[1].correct == 1 and bins[1].fraction_correct == 0.5
    assert bins[1].mean_score == pytest.approx(0.135)
    assert math.isnan(bins[2].mean_score) and bins[9].fraction_correct == 1.0  # 1.0: last bin


def test_eval_report_per_source_and_kind():
    scores = [0.9, 0.8, 0.2, 0.6, 0.1, 0.7]
    labels = [True, True, False, False, False, True]
    sources = ["a", "a", "a", "b", "b", "b"]
    kinds = ["gold_boxed", "gold_boxed", "answer_changed", "degenerate_opener",
             "degenerate_opener", None]
    report = eval_report(scores, labels, sources, kinds)
    assert report.overall.metrics.accuracy == pytest.approx(5 / 6)
    assert report.by_source["b"].called_correct == pytest.approx(2 / 3)
    opener = report.by_kind["degenerate_opener"]
    assert opener.called_correct == 0.5 and opener.mean_score == pytest.approx(0.35)
    assert opener.one_label and math.isnan(opener.metrics.auroc)
    assert set(report.by_kind) == {"gold_boxed", "answer_changed", "degenerate_opener", "(none)"}
    as_json = json.loads(json.dumps(report.to_dict()))
    assert as_json["by_kind"]["degenerate_opener"]["auroc"] is None
    assert as_json["accuracy"] == pytest.approx(5 / 6)  # overall figures stay at the top level
    text = format_report(report)
    assert "kind" in text and "degenerate_opener" in text
    line = next(x for x in text.splitlines() if x.startswith("degenerate_opener"))
    assert " - " in line  # undefined F1 / AUROC print as '-'
    assert eval_report(scores, labels, sources, [None] * 6).by_kind == {}


def test_plot_writes_a_png(tmp_path):
    logits, labels = _synthetic(2.0, n=500)
    out = plot_reliability(apply_temperature(logits, 1.0), labels, tmp_path / "d" / "r.png",
                           title="synthetic")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no items"):
        plot_reliability([], [], tmp_path / "empty.png")


def test_temperature_is_saved_applied_and_reset(tiny_models, tmp_path):
    rm = RewardModel.load(tiny_models.reward, max_length=128)
    triples = [Triple("What is 2+2?", "4", f"The answer is {k}.") for k in range(6)]
    raw = rm.raw_logits(triples)
    assert rm.temperature == 1.0 and rm.score(triples) == pytest.approx(apply_temperature(raw, 1))
    rm.temperature = 2.5
    rm.save(tmp_path / "m", extra={"base": "tiny"})
    spec = json.loads((tmp_path / "m" / "cooper_rm.json").read_text())
    assert spec["temperature"] == 2.5 and spec["base"] == "tiny"
    loaded = RewardModel.load(tmp_path / "m")
    assert loaded.temperature == 2.5
    assert loaded.score(triples) == pytest.approx(apply_temperature(raw, 2.5), abs=1e-6)
    loaded.save_spec(tmp_path / "m")  # rewriting the spec keeps the other keys
    assert json.loads((tmp_path / "m" / "cooper_rm.json").read_text())["base"] == "tiny"
    rows = [LabelledTriple(t, k % 2 == 0, str(k), "s") for k, t in enumerate(triples)]
    train_bce(loaded, rows, RMTrainConfig(epochs=1, holdout=0, batch_size=4), progress=False)
    assert loaded.temperature == 1.0  # the fitted value belonged to the old weights
    spec["temperature"] = -1
    (tmp_path / "m" / "cooper_rm.json").write_text(json.dumps(spec))
    with pytest.raises(UserError, match="cooper_rm.json: temperature must be"):
        RewardModel.load(tmp_path / "m")

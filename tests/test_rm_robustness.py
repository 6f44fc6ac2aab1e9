"""The robustness suite, and why the data builder matters: a model trained on answer-changed data
alone is fooled by degenerate text, one trained on `cooper data build`'s mix is not.

The main test trains two tiny random reward models the same way (seeded, CPU, a few seconds each)
on 400 triples of single-digit additions: one on gold solutions and their answer-changed copies
(the old recipe, `cooper data perturbed`), one on the default mix. Neither learns arithmetic in
8 epochs; what differs is what their data says about text without an answer. The first model
never saw any and pays it about its average score (in seeds 0 to 4: above 0.5 for 83 to 100% of
the degenerate items); the second learned that such text is wrong (0 to 4%). If the builder
stops making degenerate negatives, the second model becomes the first and this test fails.
"""

from __future__ import annotations

import hashlib
import json
import math
import random

import pytest

from cooper.cli import main
from cooper.config.data_mix import DataMixConfig
from cooper.config.rm import RMTrainConfig
from cooper.data import negative_kinds
from cooper.data.mix import build_mix
from cooper.data.perturb import perturbed_triples
from cooper.data.problems import load_problems
from cooper.rm import robustness
from cooper.rm.model import RewardModel
from cooper.rm.robustness import (
    DEGENERATE_KINDS,
    SUITE_KINDS,
    SUITE_VERSION,
    build_suite,
    format_suite,
    suite_problems,
    suite_report,
)
from cooper.rm.training import train_bce
from cooper.types import Problem
from cooper.verify.verifier import Verifier

# sha256 of the items of the suite over the first 5 GSM8K test problems, for SUITE_VERSION 1. If
# this fails, the suite changed: bump SUITE_VERSION and put the new hash here (reports of two
# versions must not be compared as if they scored the same items).
SUITE_V1_GSM8K5 = "2d1d5cb5bdc407529a14f93d2b3d0f73d6d3feae93f5947e6eb817338094b43c"


@pytest.fixture(scope="module")
def verifier():
    with Verifier(workers=1) as v:
        yield v


def _fingerprint(items) -> str:
    rows = [i.to_json() for i in items]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------ the suite itself


def test_suite_items_are_verified_negatives_of_every_kind(verifier):
    for dataset, split in (("gsm8k", "test"), ("math500", "test"), ("arith_small", "test")):
        suite = build_suite(suite_problems(dataset, split, 8), verifier=verifier)
        assert suite.excluded == [] and len(suite.items) == 8 * len(SUITE_KINDS)
        assert {i.kind for i in suite.items} == set(SUITE_KINDS)
        assert all(i.label is False for i in suite.items)
        assert len({i.id for i in suite.items}) == len(suite.items)
        verdicts = verifier.verify_batch([i.triple.completion for i in suite.items],
                                         [i.triple.reference for i in suite.items])
        assert all(v.reason in ("wrong", "no_answer") for v in verdicts), dataset
    padded = [i for i in suite.items if i.kind == "long_padding"]
    assert all(len(i.triple.completion) > 5000 for i in padded)  # past the kept head and tail


def test_suite_is_stable_and_versioned(verifier):
    first = build_suite(suite_problems("gsm8k", "test", 5), verifier=verifier).items
    again = build_suite(suite_problems("gsm8k", "test", 5), verifier=verifier).items
    assert [i.to_json() for i in first] == [i.to_json() for i in again]
    assert SUITE_VERSION == 1 and _fingerprint(first) == SUITE_V1_GSM8K5


def test_suite_strings_differ_from_the_training_builder():
    # the suite measures generalisation: none of its degenerate strings is a training string
    pairs = [(robustness.OPENERS, negative_kinds.OPENERS),
             (robustness.PUNCTUATION, negative_kinds.PUNCTUATION),
             (robustness.FOREIGN, negative_kinds.FOREIGN),
             (robustness.EMPTY, negative_kinds.EMPTY),
             (robustness.TEMPLATES, negative_kinds.TEMPLATES),
             (robustness.CLAIMS, negative_kinds.CLAIMS),
             (robustness.RESTATED_REFERENCE, negative_kinds.NUMBER_WRAPPERS),
             (robustness.RESTATED, negative_kinds.QUESTION_WRAPPERS)]
    for suite_strings, training_strings in pairs:
        assert not set(suite_strings) & set(training_strings)


def test_items_the_verifier_accepts_are_left_out_and_counted(verifier):
    # a question that states its answer: restating it is *correct* by the verifier
    p = Problem("q", "The answer is 7. What is 3 + 4?", "7", "toy",
                "3 + 4 = 7. The answer is \\boxed{7}.")
    suite = build_suite([p], verifier=verifier)
    assert [(i.kind, reason) for i, reason in suite.excluded] == [("restated_question", "correct")]
    scores = [0.9 if i.kind == "opener" else 0.1 for i in suite.items]
    report = suite_report(suite, scores, dataset="toy")
    assert report.excluded == {"restated_question": 1} and "restated_question" not in report.kinds
    assert report.kinds["opener"].false_positive_rate == 1.0
    assert report.kinds["empty"].false_positive_rate == 0.0
    assert report.overall.false_positives == 1 and report.overall.n == len(SUITE_KINDS) - 1
    assert report.top[0]["kind"] == "opener" and report.top[0]["score"] == 0.9
    text = format_suite(report)
    assert "robustness suite v1" in text and "left out" in text and "overall" in text
    assert json.loads(json.dumps(report.to_dict()))["suite_version"] == SUITE_VERSION


# ------------------------------------------------------------------ the builder matters


def _train(base, rows, seed=0) -> RewardModel:
    rm = RewardModel.load(base, max_length=256)
    train_bce(rm, rows, RMTrainConfig(lr=3e-3, epochs=8, batch_size=16, holdout=0, seed=seed),
              progress=False)
    return rm


def _degenerate_fpr(rm, suite) -> tuple[float, float]:
    items = [i for i in suite.items if i.kind in DEGENERATE_KINDS]
    scores = rm.score([i.triple for i in items], batch_size=32)
    return sum(s >= 0.5 for s in scores) / len(scores), sum(scores) / len(scores)


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, verifier):
    import torch

    from cooper.experiment.testbed import build_tiny_models

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic on every machine, and fast on a small CPU
    tmp = tmp_path_factory.mktemp("robust")
    tiny = build_tiny_models(tmp / "tiny", hidden_size=32, heads=2, seed=0)
    train = load_problems("arith_small", "train").problems
    answer_changed, _ = perturbed_triples(train, 400, random.Random(0), verifier=verifier)
    mixed, _ = build_mix(train, 400, DataMixConfig(), verifier=verifier)
    suite = build_suite(suite_problems("arith_small", "test", 20), verifier=verifier)
    old, new = _train(tiny.policy, answer_changed), _train(tiny.policy, mixed)
    new.save(tmp / "rm_mix")
    yield old, new, suite, tmp
    torch.set_num_threads(threads)


def test_answer_changed_data_is_fooled_and_the_mix_is_not(two_models):
    old, new, suite, _ = two_models
    old_fpr, old_mean = _degenerate_fpr(old, suite)
    new_fpr, new_mean = _degenerate_fpr(new, suite)
    assert old_fpr >= 0.5, f"answer-changed-only model: degenerate FPR {old_fpr:.2f}"
    # (seeds 0-4: 0.00-0.04, mean score 0.09-0.14; with the degenerate kinds' weights set to 0
    # the same model gets 0.19 and 0.34, so a builder that stops making them fails here)
    assert new_fpr <= 0.1 and new_mean <= 0.25, \
        f"mixed-data model: degenerate FPR {new_fpr:.2f}, mean score {new_mean:.2f}"
    assert old_fpr - new_fpr >= 0.4 and old_mean - new_mean >= 0.2
    print(f"degenerate kinds: answer-changed data FPR {old_fpr:.2f} (mean score {old_mean:.2f}), "
          f"mixed data FPR {new_fpr:.2f} (mean score {new_mean:.2f})")


# ------------------------------------------------------------------ the command


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_eval_prints_tables_json_and_a_plot(two_models, capsys, verifier):
    _, _, _, tmp = two_models
    test = tmp / "test.jsonl"
    rows, _ = build_mix(load_problems("arith_small", "test").problems, 60,
                        DataMixConfig(seed=5), verifier=verifier)
    test.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    plot = tmp / "plots" / "reliability.png"
    code, out, _ = _run(capsys, "rm", "eval", "--model", tmp / "rm_mix", "--data", test,
                        "--json", "--plot", plot)
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["n"] == 60 and set(result["by_source"]) == {"arith_small"}
    assert set(result["by_kind"]) == {r.kind for r in rows}
    gold = result["by_kind"]["gold_boxed"]
    assert gold["positives"] == gold["n"] and gold["called_correct"] == gold["recall"]
    assert result["by_kind"]["empty_answer"]["auroc"] is None  # one label: undefined, not 0
    for header in ("source ", "kind ", "called_correct", "degenerate_opener"):
        assert header in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


def test_eval_runs_the_suite(two_models, capsys):
    _, _, _, tmp = two_models
    code, out, _ = _run(capsys, "rm", "eval", "--model", tmp / "rm_mix", "--suite", "robustness",
                        "--dataset", "arith_small", "--n", "4", "--json")
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["suite"] == "robustness" and result["suite_version"] == SUITE_VERSION
    assert result["dataset"] == "arith_small/test" and result["overall"]["n"] == 4 * 11
    assert set(result["kinds"]) == set(SUITE_KINDS)
    assert f"robustness suite v{SUITE_VERSION}" in out and "FP rate" in out
    code, _, err = _run(capsys, "rm", "eval", "--model", tmp / "rm_mix")
    assert code == 2 and "--suite robustness" in err
    code, _, err = _run(capsys, "rm", "eval", "--model", tmp / "rm_mix", "--data", "x.jsonl",
                        "--n", "3")
    assert code == 2 and "add --suite robustness" in err


def test_calibrate_writes_a_temperature_that_score_applies(two_models, capsys, verifier):
    _, _, _, tmp = two_models
    held = tmp / "held.jsonl"
    rows, _ = build_mix(load_problems("arith_small", "test").problems, 80,
                        DataMixConfig(seed=9), verifier=verifier)
    held.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    model = tmp / "rm_mix"
    before = RewardModel.load(model)
    raw = before.raw_logits([r.triple for r in rows])
    code, out, _ = _run(capsys, "rm", "calibrate", "--model", model, "--data", held, "--json",
                        "--dry-run")
    assert code == 0 and "nothing written" in out and RewardModel.load(model).temperature == 1.0
    assert "temperature" not in json.loads((model / "cooper_rm.json").read_text()) or \
        json.loads((model / "cooper_rm.json").read_text())["temperature"] == 1.0
    code, out, _ = _run(capsys, "rm", "calibrate", "--model", model, "--data", held, "--json")
    result = json.loads(out.strip().splitlines()[-1])
    t = result["after"]["temperature"]
    assert code == 0 and t != 1.0 and result["after"]["nll"] <= result["before"]["nll"]
    spec = json.loads((model / "cooper_rm.json").read_text())
    assert spec["temperature"] == t and spec["max_length"] == 256  # the rest is kept
    after = RewardModel.load(model)
    scores = after.score([r.triple for r in rows])
    expected = [1 / (1 + math.exp(-x / t)) for x in raw]
    assert max(abs(a - b) for a, b in zip(scores, expected, strict=True)) < 1e-6
    # a temperature changes no ranking
    assert all(scores[i] <= scores[j] for i in range(len(raw)) for j in range(len(raw))
               if raw[i] < raw[j])


def test_calibrate_can_fit_on_a_label_balanced_subset(two_models, capsys, verifier):
    _, _, _, tmp = two_models
    held = tmp / "held_skewed.jsonl"
    rows, _ = build_mix(load_problems("arith_small", "test").problems, 40,
                        DataMixConfig(seed=9, positive_fraction=0.25), verifier=verifier)
    held.write_text("".join(json.dumps(r.to_json()) + "\n" for r in rows))
    model = tmp / "rm_mix"
    fits = {}
    for extra in ([], ["--balance", "3"]):
        code, out, _ = _run(capsys, "rm", "calibrate", "--model", model, "--data", held,
                            "--json", "--dry-run", *extra)
        assert code == 0
        fits[bool(extra)] = json.loads(out.strip().splitlines()[-1])
    assert fits[False]["n"] == 40 and fits[True]["n"] == 20  # 10 correct, 10 of the 30 wrong
    assert "balanced: 20 rows" in out
    assert fits[True]["after"]["temperature"] != fits[False]["after"]["temperature"]

"""Evaluation maths and the in-memory evaluator: hand-worked numbers, then a tiny real model."""

from __future__ import annotations

from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cooper.data.prompts import DEFAULT_PROMPT_TEMPLATE, prompt_messages
from cooper.errors import UserError
from cooper.eval.sampling import (
    SampleRecord,
    chunk_problems,
    default_ks,
    evaluate_problems,
    majority_vote,
    normalize_answer,
    pass_at_k,
    summarize,
)
from cooper.infra.generation import HFGenerator, SamplingConfig
from cooper.types import Problem

# ------------------------------------------------------------------ pass@k


def test_pass_at_k_hand_worked():
    # n=5, c=2, k=3: every 3-subset of 5 misses both correct ones only if it is the 3 wrong
    # ones: 1 - C(3,3)/C(5,3) = 1 - 1/10
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)  # pass@1 is the fraction correct
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 1, 8) == 1.0  # n - c < k: any 8 of 8 include the correct one
    for bad in ((4, 5, 1), (4, 1, 0), (4, 1, 5), (4, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


@given(st.integers(1, 40).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_the_binomial_formula(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)
    if k < n:  # more draws never hurt
        assert pass_at_k(n, c, k + 1) >= pass_at_k(n, c, k) - 1e-12


def test_default_ks():
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(6) == [1, 2, 4, 6]
    assert default_ks(2) == [1, 2]
    assert default_ks(1) == [1]


# ------------------------------------------------------------------ majority vote


@pytest.mark.parametrize("a, b", [
    ("$1,000$", "1000"), ("18.0", "18"), ("\\dfrac{1}{2}", "\\frac{1}{2}"),
    ("\\left( 1, 2 \\right)", "(1,2)"), ("90^\\circ", "90"), ("50\\%", "50"), ("7.", "7"),
    ("0.50", "0.5"),
])
def test_normalize_answer_merges_variants(a, b):
    assert normalize_answer(a) == normalize_answer(b)


def test_normalize_answer_keeps_different_answers_apart():
    assert normalize_answer("12") != normalize_answer("1.2")
    assert normalize_answer("\\frac{1}{2}") != normalize_answer("\\frac{2}{1}")
    assert normalize_answer("1,2") != normalize_answer("12")  # a pair, not a thousands comma


def test_majority_vote():
    # "5" twice (samples 1 and 3, both wrong) beats "4" once (sample 0, correct)
    assert majority_vote(["4", "5", None, "5.0"], [True, False, False, False]) == ("5", False)
    # a tie goes to the answer seen first
    assert majority_vote(["4", "5", "5", "4"], [True, False, False, True]) == ("4", True)
    # samples without an answer do not vote
    assert majority_vote([None, None, "3"], [False, False, True]) == ("3", True)
    assert majority_vote([None, " "], [False, False]) == (None, False)


def _rec(pid: str, j: int, correct: bool, extracted: str | None, tokens: int = 10,
         finish: str = "stop") -> SampleRecord:
    return SampleRecord("b", pid, j, "p", "c", "r", extracted, correct, "", tokens, finish)


def test_summarize_hand_worked():
    samples = [
        _rec("a", 0, True, "1"), _rec("a", 1, False, "2"), _rec("a", 2, True, "1"),
        _rec("a", 3, False, None, 20, "length"),
        _rec("b", 0, False, "7"), _rec("b", 1, False, "7"), _rec("b", 2, True, "8"),
        _rec("b", 3, False, "9"),
    ]
    m, scores = summarize("b", samples)
    assert (m.num_problems, m.samples_per_problem) == (2, 4)
    assert m.accuracy == pytest.approx(3 / 8)
    # a: c=2 -> pass@2 = 1 - C(2,2)/C(4,2) = 5/6; b: c=1 -> 1 - C(3,2)/C(4,2) = 1/2
    assert m.pass_at_k[2] == pytest.approx((5 / 6 + 1 / 2) / 2)
    assert m.pass_at_k[4] == pytest.approx(1.0)
    assert m.pass_at_k[1] == pytest.approx(3 / 8)
    # a: "1" wins (correct); b: "7" wins (wrong)
    assert [(s.majority_answer, s.majority_correct) for s in scores] == [("1", True), ("7", False)]
    assert m.majority_accuracy == pytest.approx(0.5)
    assert m.mean_tokens == pytest.approx(90 / 8)
    assert m.truncated_fraction == pytest.approx(1 / 8)
    with pytest.raises(UserError):
        summarize("b", samples, ks=[5])


def test_samples_file_round_trip_with_unusual_line_breaks(tmp_path):
    from cooper.eval.run import _to_jsonl, read_samples

    odd = SampleRecord("b", "p", 0, "q\u2028x", "a\u2029b\x85c\rd\u2028\n\\boxed{1}", "1", "1",
                       True, "correct", 7, "stop")
    path = tmp_path / "s.jsonl"
    path.write_text(_to_jsonl([odd, _rec("p", 1, False, None)]), encoding="utf-8")
    assert read_samples(path) == [odd, _rec("p", 1, False, None)]


# ------------------------------------------------------------------ prompts and chunks


def test_prompt_template_keeps_braces_and_needs_the_placeholder():
    msgs = prompt_messages("What is 2+2?", "Q: {question}\nAnswer in \\boxed{} please.")
    assert msgs == [{"role": "user", "content": "Q: What is 2+2?\nAnswer in \\boxed{} please."}]
    assert prompt_messages("x")[0]["content"] == DEFAULT_PROMPT_TEMPLATE.replace("{question}", "x")
    with pytest.raises(UserError, match="question"):
        prompt_messages("x", "no placeholder {}")


def test_chunks_are_consecutive_and_cover_everything():
    probs = [Problem(str(i), "q", "1", "t") for i in range(7)]
    chunks = chunk_problems(probs, 3)
    assert [[p.id for p in c] for c in chunks] == [["0", "1", "2"], ["3", "4", "5"], ["6"]]
    with pytest.raises(UserError):
        chunk_problems(probs, 0)


# ------------------------------------------------------------------ with a tiny real model


@pytest.fixture(scope="module")
def gen(tiny_models):
    return HFGenerator.load(str(tiny_models.policy), batch_size=4)


def _problems(k: int) -> list[Problem]:
    return [Problem(f"p{i}", f"What is {i} + {i}?", str(2 * i), "toy") for i in range(k)]


def test_evaluate_problems_records_and_metrics(gen):
    probs = _problems(5)
    s = SamplingConfig(n=3, temperature=1.0, top_p=0.95, max_new_tokens=8, seed=1)
    r = evaluate_problems(gen, probs, s, benchmark="toy", chunk_size=2)
    assert len(r.samples) == 15 and len(r.problems) == 5
    assert [(x.problem_id, x.sample) for x in r.samples] == [
        (p.id, j) for p in probs for j in range(3)]
    assert all(x.prompt.startswith("<|im_start|>user\n") for x in r.samples)  # chat template
    assert all(1 <= x.num_tokens <= 8 for x in r.samples)
    assert r.metrics.accuracy == sum(x.correct for x in r.samples) / 15
    assert r.metrics.pass_at_k.keys() == {1, 2, 3}
    # the same settings reproduce the same samples; another chunking forms other batches
    again = evaluate_problems(gen, probs, s, benchmark="toy", chunk_size=2)
    assert again.samples == r.samples
    with pytest.raises(UserError):
        evaluate_problems(gen, [], s)
    with pytest.raises(UserError):
        evaluate_problems(gen, probs, s, ks=[4])

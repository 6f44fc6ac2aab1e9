"""Rule-based wrong answers: format kept, consistent rewrites, verified wrong, deterministic."""

from __future__ import annotations

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import run_cli
from cooper.data.perturb import (
    answer_change,
    gold_solution,
    perturbed_triples,
    rewrite_final_answer,
    wrong_answer,
)
from cooper.data.problems import load_problems
from cooper.types import Problem
from cooper.verify.extraction import find_answer
from cooper.verify.verifier import Verifier

GSM8K = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
         "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")


@pytest.fixture(scope="module")
def verifier():
    with Verifier(workers=1) as v:
        yield v


@pytest.mark.parametrize("answer, pattern", [
    ("72", r"^\d+$"), ("1,000", r"^\d{1,3}(,\d{3})+$|^\d{1,3}$"), ("3.5", r"^\d+\.\d$"),
    ("0.25", r"^\d+\.\d\d$"), ("-4", r"^-?\d+$"), (r"\frac{14}{3}", r"^\\frac\{\d+\}\{\d+\}$"),
    ("$18", r"^\$\d+$"),
])
def test_wrong_answer_keeps_the_format(answer, pattern):
    for seed in range(20):
        new = wrong_answer(answer, random.Random(seed))
        assert new != answer and re.match(pattern, new), (answer, new)


def test_wrong_answer_needs_a_digit():
    assert wrong_answer(r"\pi", random.Random(0)) is None
    assert wrong_answer(r"\text{Evelyn}", random.Random(0)) is None


@settings(max_examples=200)
@given(n=st.integers(0, 10**9), seed=st.integers(0, 2**32))
def test_wrong_integer_differs_and_stays_non_negative(n, seed):
    new = wrong_answer(str(n), random.Random(seed))
    assert int(new) != n and int(new) >= 0


def test_gsm8k_solution_is_rewritten_consistently(verifier):
    wrong = rewrite_final_answer(GSM8K, "72", random.Random(3), verifier=verifier)
    new = find_answer(wrong).text
    assert new != "72"
    # every statement of the result changed: the calculator annotation, its output, the marker
    assert f"<<48+24={new}>>{new} clips" in wrong and wrong.endswith(f"#### {new}")
    assert "72" not in wrong
    # intermediate values and the question's numbers are untouched
    assert "48/2 = <<48/2=24>>24 clips in May" in wrong
    assert not verifier.verify(wrong, "72").correct


def test_thousands_separators_follow_each_statement(verifier):
    text = "profit 200,000-130,000=$<<200000-130000=70000>>70,000\n#### 70000"
    wrong = rewrite_final_answer(text, "70000", random.Random(0), verifier=verifier)
    new = find_answer(wrong).text
    assert f"=$<<200000-130000={new}>>{int(new):,}" in wrong and "70" not in wrong.split("<<")[1]


def test_policy_completion_with_boxed_answer(verifier):
    text = r"So $x = 2 \cdot 21 = 42$ and the answer is $\boxed{42}$."
    wrong = rewrite_final_answer(text, "42", random.Random(1), verifier=verifier)
    new = find_answer(wrong).text
    assert wrong == text.replace("42", new) and new != "42"
    assert rewrite_final_answer("no final answer", "42", random.Random(1)) is None


def test_rewrite_is_deterministic(verifier):
    a = rewrite_final_answer(GSM8K, "72", random.Random(7), verifier=verifier)
    b = rewrite_final_answer(GSM8K, "72", random.Random(7), verifier=verifier)
    assert a is not None and a != GSM8K, "no rewrite: two Nones would compare equal"
    assert a == b and find_answer(a).text != "72"


def test_svamp_equation_becomes_a_solution():
    p = load_problems("svamp", limit=1)[0]
    sol = gold_solution(p)
    assert find_answer(sol).text == p.reference and p.solution.strip() in sol
    assert gold_solution(Problem("x", "q", "1", "local")) is None


def test_perturbed_triples_are_balanced_and_verified(verifier):
    problems = load_problems("math500", limit=40)
    triples, skipped = perturbed_triples(problems, 20, random.Random(0), verifier=verifier)
    assert len(triples) == 20 and [t.label for t in triples] == [1, 0] * 10
    assert len({t.id for t in triples}) == 20
    for gold, bad in zip(triples[::2], triples[1::2], strict=True):
        assert gold.triple.question == bad.triple.question and gold.triple.reference == bad.triple.reference
        assert verifier.verify(gold.triple.completion, gold.triple.reference).correct
        assert verifier.verify(bad.triple.completion, bad.triple.reference).reason == "wrong"
    again, _ = perturbed_triples(problems, 20, random.Random(0), verifier=verifier)
    assert again == triples
    with pytest.raises(ValueError, match="even"):
        perturbed_triples(problems, 3, random.Random(0))


def test_min_change_leaves_out_near_misses(verifier):
    """The third round's initial data: every wrong answer more than 10 from the reference, where
    the plain draw has many within 10 (one off, a units digit); the set is as large and right."""
    problems = load_problems("arith_2x1", "train")
    plain, _ = perturbed_triples(problems, 200, random.Random(0), verifier=verifier)
    far, skipped = perturbed_triples(problems, 200, random.Random(0), verifier=verifier,
                                     min_change=10)
    changes = [answer_change(t.triple.completion, t.triple.reference) for t in plain[1::2]]
    assert sum(c <= 10 for c in changes) >= 40  # near misses are common without the setting
    assert len(far) == 200 and not skipped and [t.label for t in far] == [1, 0] * 100
    for bad in far[1::2]:
        assert answer_change(bad.triple.completion, bad.triple.reference) > 10
        assert verifier.verify(bad.triple.completion, bad.triple.reference).reason == "wrong"
    # a fraction has no distance to a plain number: skipped, and the skip says why
    half = Problem("half", "Half of one?", "\\frac{1}{2}", "local",
                   solution="It is \\boxed{\\frac{1}{2}}.")
    assert perturbed_triples([half], 2, random.Random(0), verifier=verifier)[0]
    triples, skipped = perturbed_triples([half], 2, random.Random(0), verifier=verifier,
                                         min_change=10)
    assert not triples and "no change over 10 in 20 draws" in skipped[0].detail
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="min_change"):
            perturbed_triples([half], 2, random.Random(0), min_change=bad)


def test_answer_change():
    assert answer_change("3 + 4 = 9. The answer is \\boxed{9}.", "7") == 2
    assert answer_change("The answer is \\boxed{1,010}.", "1000") == 10
    assert answer_change("no answer here", "7") is None
    assert answer_change("\\boxed{\\frac{1}{2}}", "3") is None


def test_cli_writes_a_balanced_file(tmp_path):
    out = tmp_path / "triples.jsonl"
    proc = run_cli("data", "perturbed", "--dataset", "gsm8k", "--split", "train", "--n", "20",
                   "--out", out, "--seed", "5")
    assert "wrote 20 triples" in proc.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20 and sum(r["label"] for r in rows) == 10
    assert set(rows[0]) == {"id", "source", "question", "reference", "completion", "label"}
    assert all(r["source"] == "gsm8k" for r in rows)


def test_cli_min_change_writes_no_near_misses(tmp_path):
    out = tmp_path / "far.jsonl"
    run_cli("data", "perturbed", "--dataset", "arith_2x1", "--split", "train", "--n", "40",
            "--min-change", "10", "--out", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 40 and sum(r["label"] for r in rows) == 20
    assert all(answer_change(r["completion"], r["reference"]) > 10 for r in rows if not r["label"])
    for value in ("-1", "nan", "inf"):
        bad = run_cli("data", "perturbed", "--dataset", "arith_2x1", "--n", "4", "--min-change",
                      value, "--out", tmp_path / "x.jsonl", check=False)
        assert bad.returncode == 2 and "--min-change must be a finite number >= 0" in bad.stderr
    # no sum of a two-digit and a one-digit number can be changed by more than 1000: every
    # problem is skipped, counted, and the error names the setting to lower; no file is written
    far = run_cli("data", "perturbed", "--dataset", "arith_2x1", "--n", "4", "--min-change",
                  "1000", "--out", tmp_path / "x.jsonl", check=False)
    assert far.returncode == 2 and "cannot be perturbed" in far.stdout
    assert "a smaller --min-change" in far.stderr and not (tmp_path / "x.jsonl").exists()


def test_cli_errors_say_how_to_fix(tmp_path):
    odd = run_cli("data", "perturbed", "--dataset", "gsm8k", "--n", "3", "--out",
                  tmp_path / "x.jsonl", check=False)
    assert odd.returncode == 2 and "even" in odd.stderr
    big = run_cli("data", "perturbed", "--dataset", "math500", "--n", "2000", "--out",
                  tmp_path / "x.jsonl", check=False)
    assert big.returncode == 2 and "at most 1000" in big.stderr
    local = tmp_path / "p.jsonl"
    local.write_text(json.dumps({"question": "1+1?", "answer": "2"}) + "\n")
    nosol = run_cli("data", "perturbed", "--dataset", local, "--n", "2", "--out",
                    tmp_path / "x.jsonl", check=False)
    assert nosol.returncode == 2 and "--solution-field" in nosol.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_an_equation_answer_is_rewritten_in_its_result():
    # "\boxed{3 + 4 = 7}" is verified correct for reference 7; its rewrite must change the
    # result, not an operand, and must be verified wrong (math-verify calls any two equations
    # equal, so the check is against the result)
    from cooper.verify.verifier import verify

    for seed in range(5):
        out = rewrite_final_answer("So \\boxed{3 + 4 = 7}", "7", random.Random(seed))
        assert out is not None and out.startswith("So \\boxed{3 + 4 = ") and out != "So \\boxed{3 + 4 = 7}"
        assert verify(out, "7").reason == "wrong"

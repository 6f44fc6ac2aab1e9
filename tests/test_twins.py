"""Wrong twins (cooper.labelling.counterfactual): one change in the answer's own form, proven
different from the answer the judge called right and from the reference, checked a second
time by math-verify's own verdict; on every MATH500 reference and every right answer of
TinyV's HardVerify-Math that the strict rule rejects."""

from __future__ import annotations

import threading
import time

import pytest


def box(answer: str) -> str:
    return f"The answer is \\boxed{{{answer}}}."


def mv_equal(a: str, b: str) -> bool | None:
    """math-verify's verdict (None: it cannot read ``b``)."""
    from cooper.bench.twins import math_verify_equal
    return math_verify_equal(a, b)


# (answer, reference, kind, twin answer): the reference is the answer itself where None
FORMS = [
    ("\\frac{\\sqrt{21}}{5}", None, "radical", "\\frac{\\sqrt{21}}{6}"),
    ("(6,31,-1)", None, "tuple", "(6,31,-2)"),
    ("(-\\sqrt{3}, \\sqrt{3})", None, "tuple", "(-\\sqrt{3}, \\sqrt{4})"),
    ("[2,5)", None, "interval", "(2,5)"),  # a bracket first
    ("(-\\infty, 0]", None, "interval", "(-\\infty, 0)"),  # never at an infinite end
    ("x \\in [-2,7]", None, "interval", "x \\in [-2,7)"),
    ("288 \\pi", None, "pi", "289 \\pi"),
    ("6 - 5i", None, "complex", "6 - 6i"),
    ("50\\%", None, "percent", "51\\%"),
    ("p - q", None, "expression", "p + q"),  # no number: a sign
    ("\\cot x", None, "expression", "-\\cot x"),
    ("x^2+1", None, "expression", "x^2+2"),
    ("\\text{(C)}", None, "choice", "\\text{(D)}"),
    ("(E)", None, "choice", "(A)"),
    ("1,200", None, "integer", "1,201"),  # the bug: not 1,1201
    ("10,\\!080", None, "integer", "10,\\!081"),
    ("\\$18.90", None, "decimal", "\\$18.91"),
    (".35625", None, "decimal", ".35626"),
    (".0000672", None, "decimal", ".0000772"),  # a last digit below math-verify's rounding: not
    ("f(x)=2x", None, "equation", "f(x)=3x"),
    ("y = 2x + 3", None, "equation", "y = 2x + 4"),
    ("\\{1, 2\\}", None, "tuple", "\\{1, 3\\}"),
    ("1 \\pm \\sqrt{19}", None, "tuple", "1 \\pm \\sqrt{18}"),
    ("\\frac{1}{8}", None, "fraction", "\\frac{1}{9}"),
    ("\\begin{pmatrix} -7 \\\\ 16 \\\\ 5 \\end{pmatrix}", None, "matrix",
     "\\begin{pmatrix} -7 \\\\ 16 \\\\ 6 \\end{pmatrix}"),
    ("k < -5", None, "inequality", "k < -6"),
    ("90^\\circ", None, "integer", "91^\\circ"),
    ("47_8", None, "integer", "46_8"),  # a base-8 digit stays one
    ("C", "C", "choice", "D"),  # the bug: not CI, a Roman numeral
    ("Seventy-Two", "72", "words", "Seventy-Three"),  # case and hyphen kept
    ("seventy two", "72", "words", "seventy three"),
    ("XII", "12", "roman", "XIII"),
    ("YES", "True", "truth", "NO"),
    ("Yes", "yes", "truth", "No"),
]


@pytest.mark.parametrize("answer, reference, kind, twin", FORMS)
def test_each_kind_is_twinned_once_in_its_own_form(answer, reference, kind, twin):
    from cooper.labelling.counterfactual import make_twin
    from cooper.labelling.twin_certify import different
    from cooper.labelling.twin_read import read, read_reference

    reference = answer if reference is None else reference
    made = make_twin(f"So {box(answer)} Done.", reference)
    assert (made.kind, made.answer, made.original, made.reason) == (kind, twin, answer, None)
    assert made.text == f"So {box(twin)} Done."  # the answer alone changed
    roman = kind == "roman"
    assert different(read(twin, roman=roman), read(answer, roman=roman))  # our path
    assert different(read(twin, roman=roman), read_reference(reference))
    assert mv_equal(twin, answer) is not True  # math-verify's, a second path
    assert mv_equal(twin, reference) is not True


def test_a_twin_is_never_the_reference_nor_the_answer_judged_right():
    from cooper.labelling.counterfactual import make_twin

    # one more than a wrong 7 would be the reference 8: one less, then
    assert make_twin(box("7"), "8").answer == "6"
    assert make_twin(box("seven"), "8").answer == "six"
    assert make_twin(box("C"), "\\text{(D)}").answer == "E"  # the right letter skipped
    assert make_twin(box("\\frac{1}{8}"), "\\frac{1}{9}").answer == "\\frac{1}{7}"
    # the judge called another answer right: the twin differs from that one too
    assert make_twin(box("12"), "12", judged="13").answer == "11"
    # "No" would be right: no twin, and why
    assert make_twin(box("Yes"), "False").reason == "uncertified"


def test_an_answer_without_a_form_to_change_gets_no_twin_and_the_reason():
    from cooper.labelling.counterfactual import KINDS, REASONS, Twin, make_twin, wrong_twin

    assert make_twin(box("\\text{Evelyn}"), "\\text{Evelyn}") == Twin(
        None, None, "\\text{Evelyn}", "text", "no_edit")
    assert make_twin("I do not know", "7") == Twin(None, None, None, "none", "no_answer")
    long = "+".join(["x"] * 150)
    assert make_twin(box(long), "x").reason == "too_long"
    # a list of letters math-verify cannot read: nothing is proven, no twin
    assert make_twin(box("b, a, d, c"), "b < a < d < c").reason == "uncertified"
    assert wrong_twin(box("\\text{Evelyn}"), "\\text{Evelyn}") is None
    assert wrong_twin(box("1,200"), "1200") == box("1,201")
    assert {"text", "none", "choice", "truth", "words", "roman"} <= set(KINDS)
    assert set(REASONS) == {"no_answer", "too_long", "no_edit", "uncertified"}


def test_a_label_in_a_sentence_is_not_changed_and_a_misread_reference_is_not_trusted():
    from cooper.labelling.counterfactual import make_twin

    # "Sequence 1" is a label: changing it says the same; a value is changed
    made = make_twin(box("Sequence 1: 1, 2 and Sequence 2: 3, 4"), "1,2,3,4")
    assert made.answer == "Sequence 1: 1, 2 and Sequence 2: 3, 5"
    # math-verify reads "{x | 2 < x < 3}" as 3: not compared; a number in it is never the
    # changed one, so (2, 3) from a wrong (2, 4) is not made
    assert make_twin(box("(2, 4)"), "\\{x | 2 < x < 3\\}").answer == "(2, 5)"


@pytest.mark.parametrize("hostile", [
    "10^{10^{10^{10}}}", "(10^{9})!!", "2^{2^{100}}", "(10^{100})!", "\\sum_{k=1}^{10^{9}} k",
    "{" * 40 + "1" + "}" * 40, "+".join(["{{{{{{{{1}}}}}}}}"] * 11)])
def test_a_pathological_answer_costs_at_most_a_moment(hostile):
    from cooper.labelling.counterfactual import make_twin

    t = time.perf_counter()
    make_twin(box(hostile), "7")
    assert time.perf_counter() - t < 10


def test_twins_are_the_same_from_a_worker_thread():
    # judging may run outside the main thread, where math-verify's SIGALRM timeout cannot
    # be set: the reader runs without it
    from cooper.labelling.counterfactual import make_twin

    answers = ["\\frac{2}{3}", "(3,4]", "x^2-1", "\\{1, 2\\}"]
    got: dict[str, object] = {}
    worker = threading.Thread(target=lambda: got.update(
        {a: make_twin(box(a), a) for a in answers}))
    worker.start()
    worker.join()
    assert got == {a: make_twin(box(a), a) for a in answers}
    assert all(t.answer for t in got.values())


# ------------------------------------------------------------------ the whole sets

@pytest.fixture(scope="module")
def tables():
    from cooper.bench.twins import hardverify_rejected_items, math500_items, twin_table

    hard = hardverify_rejected_items()
    return {"math500": twin_table(math500_items(), 100),
            "hardverify": twin_table(hard, 100), "hard_n": len(hard)}


def test_every_math500_reference_of_a_form_gets_a_twin_math_verify_calls_wrong(tables):
    t = tables["math500"]
    assert t["n"] == 500 and t["share"] >= 0.95
    assert t["math_verify_equal"] == 0, t["equal_examples"]
    # only names and words go without (Evelyn, east, even, ellipse, Navin)
    assert {m["kind"] for m in t["missed"]} == {"text"}


def test_hardverify_right_answers_the_rule_rejects_get_twins_math_verify_calls_wrong(tables):
    t = tables["hardverify"]
    assert tables["hard_n"] == 95 and t["n"] == 95  # as the issue counted
    assert t["math_verify_equal"] == 0, t["equal_examples"]
    # Every answer with a form to change: 95%. A name or a phrase (Petya, odd, ellipse, "the
    # round trip": 13 of the 95) has none, which keeps the whole set near 80%.
    formed = [row for kind, row in t["kinds"].items() if kind != "text"]
    assert sum(r["twinned"] for r in formed) >= 0.95 * sum(r["n"] for r in formed)
    assert t["share"] >= 0.78

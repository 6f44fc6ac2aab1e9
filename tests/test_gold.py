"""The gold judge reads every form the blind-rule testbeds write (digits, words, Roman
numerals, yes/no against a stored truth value), right and wrong, where math-verify reads only the
digits."""

from __future__ import annotations

import pytest

from cooper.verify.gold import (
    MAX_ROMAN,
    gold_correct,
    in_roman,
    in_words,
    read_boolean,
    read_integer,
)


def test_every_form_reads_back_as_its_integer():
    assert all(read_integer(in_words(n)) == n for n in range(-1000, 20_000))
    assert all(read_integer(in_words(n)) == n for n in range(20_000, 1_000_000, 997))
    assert all(read_integer(in_roman(n)) == n for n in range(1, MAX_ROMAN + 1))
    assert [in_words(n) for n in (0, 32, 105, 1001, -7)] == [
        "zero", "thirty-two", "one hundred five", "one thousand one", "minus seven"]
    assert in_roman(1994) == "MCMXCIV"
    with pytest.raises(ValueError):
        in_roman(0)


@pytest.mark.parametrize("text, value", [
    ("32", 32), ("-7", -7), ("1,024", 1024), ("32.0", 32), ("$32$", 32), ("32.", 32),
    ("thirty-two", 32), ("Thirty Two", 32), ("one hundred and five", 105),
    ("negative three", -3), ("\\text{thirty-two}", 32), ("XXXII", 32), ("MMMCMXCIX", 3999),
])
def test_what_it_reads(text, value):
    assert read_integer(text) == value


@pytest.mark.parametrize("text", [
    "", "x = 32", "32 apples", "30 + 2", "3.5", "IIII", "XXXXII", "twenty ten", "five twenty",
    "thirty-two apples", "one two", "hundred", "thirtytwo", "xxxii",
    "1" * 5000, "one " * 2000, "X" * 10_000,  # huge: not read, no error
])
def test_what_it_does_not_read_is_never_guessed(text):
    assert read_integer(text) is None


@pytest.mark.parametrize("form", [str, in_words, in_roman])
def test_each_form_right_and_wrong_as_answer_and_as_reference(form):
    for n in (7, 32, 108):
        for answer in (f"The answer is \\boxed{{{form(n)}}}.", f"So the answer is {form(n)}."):
            for ref in (str(n), in_words(n), in_roman(n)):
                assert gold_correct(f"{n - 5} + 5 = {n}. {answer}", ref), (answer, ref)
                assert not gold_correct(f"{n - 5} + 5 = {n}. {answer}", str(n + 1))
        # the right number in the working but no final answer, or another final answer
        assert not gold_correct(f"{n - 5} + 5 = {form(n)}.", str(n))
        assert not gold_correct(f"{n} is close. \\boxed{{{form(n + 10)}}}", str(n))


def test_the_rule_is_blind_to_words_and_roman_numerals_and_the_gold_judge_is_not():
    from cooper.verify.verifier import verify_batch

    completions = ["\\boxed{32}", "\\boxed{thirty-two}", "\\boxed{XXXII}", "\\boxed{32}",
                   "\\boxed{32}"]
    references = ["32", "32", "32", "thirty-two", "XXXII"]
    rule = [v.correct for v in verify_batch(completions, references, mode="strict",
                                            timeout_s=10)]
    assert rule == [True, False, False, False, False]
    assert all(gold_correct(c, r) for c, r in zip(completions, references, strict=True))


@pytest.mark.parametrize("text, value", [
    ("yes", True), ("Yes", True), ("YES.", True), ("true", True), ("True", True),
    ("\\text{no}", False), ("No", False), ("false", False), ("$False$", False),
])
def test_truth_values_it_reads(text, value):
    assert read_boolean(text) is value


@pytest.mark.parametrize("text", ["", "yes no", "y", "maybe", "1", "0", "not", "yess", "x" * 500])
def test_what_is_no_truth_value_is_never_guessed(text):
    assert read_boolean(text) is None


def test_a_truth_value_answers_only_a_truth_value():
    assert gold_correct("47 < 52. The answer is \\boxed{no}.", "False")
    assert gold_correct("So the answer is yes.", "True")
    assert not gold_correct("\\boxed{yes}", "False")
    # True == 1 in Python, but a yes is no answer to a sum, nor a number to a yes/no question
    assert not gold_correct("\\boxed{yes}", "1") and not gold_correct("\\boxed{1}", "True")
    assert not gold_correct("\\boxed{0}", "False") and not gold_correct("\\boxed{no}", "0")


def test_the_rule_never_matches_yes_or_no_with_a_stored_truth_value():
    """math-verify reads each word as the product of its letters (yes: e*s*y; True: e*r*t*u),
    so no yes or no, in any case or wrapper, is ever equal to True or False: every answer of
    the comparison family is rejected, right or wrong, while the gold judge reads them."""
    from cooper.verify.verifier import verify_batch

    answers = ["yes", "no", "Yes", "NO", "\\text{yes}", "\\text{no}", "yes.", "No."]
    completions = [f"47 < 52. The answer is \\boxed{{{a}}}." for a in answers]
    for reference in ("True", "False"):
        rule = verify_batch(completions, [reference] * len(answers), mode="strict",
                            timeout_s=10)
        assert not any(v.correct for v in rule), (reference, rule)
        gold = [gold_correct(c, reference) for c in completions]
        assert gold == [(read_boolean(a) is (reference == "True")) for a in answers]

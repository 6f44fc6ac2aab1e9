"""The forms a policy can reach, cut from a step's right rollouts (``rm_update.rollout_forms``),
and ``reward.mode=judged`` as the defended design: the check of each "yes" and these pairs on by
default, the arithmetic templates gone from the update."""

from __future__ import annotations

import random

import pytest

from cooper.config.engine import ConfigError
from cooper.config.reward_modes import FORMS_REMOVED_AT
from cooper.config.train import load_config
from cooper.rl.forms import (
    ANSWER_FREE,
    FORM_KINDS,
    answer_free,
    positive_forms,
    rollout_form_pairs,
)
from cooper.types import Rollout
from cooper.verify.extraction import find_answer
from cooper.verify.gold import read_integer
from cooper.verify.verifier import verify_batch

WORKED = "We need the ratio of the two areas.\nIt is $\\frac{2}{16}$.\nSo the answer is \\boxed{\\frac{1}{8}}."


def right(pid: str, completion: str, reference: str) -> Rollout:
    return Rollout(pid, f"question {pid}?", reference, completion, True,
                   find_answer(completion, "strict").text)


@pytest.mark.parametrize("kind", ANSWER_FREE)
def test_each_answer_free_cut_states_no_final_answer(kind):
    cut = answer_free(WORKED, "What is the ratio?", kind)
    assert cut is not None and cut != WORKED
    assert find_answer(cut, "strict") is None
    assert verify_batch([cut], ["\\frac{1}{8}"], mode="strict")[0].correct is False
    expected = {"opener": "We need the ratio of the two areas.",
                "cut": "We need the ratio of the two areas.\nIt is $\\frac{2}{16}$.\nSo the answer is",
                "emptied": WORKED.replace("\\frac{1}{8}", ""), "punctuation": ".",
                "question": "What is the ratio?", "empty": ""}
    assert cut == expected[kind]


def test_a_one_line_reply_has_no_opener_apart_from_itself():
    assert answer_free("\\boxed{7}", "q", "opener") is None
    # an empty reply has no empty cut apart from itself: a pair of two equal texts teaches nothing
    assert answer_free("", "q", "empty") is None and answer_free("  ", "q", "empty") == ""
    assert answer_free("no answer here", "q", "cut") is None  # nothing to cut before


@pytest.mark.parametrize("completion, reference", [
    (WORKED, "\\frac{1}{8}"),  # a fraction
    ("The roots give \\boxed{(-\\sqrt{3}, \\sqrt{3})}.", "(-\\sqrt{3}, \\sqrt{3})"),  # an interval
    ("Solving, \\boxed{(6,31,-1)}", "(6,31,-1)"),  # a tuple
    ("so it is \\boxed{\\frac{\\sqrt{21}}{5}}", "\\frac{\\sqrt{21}}{5}"),  # a radical
    ("47 < 52, so \\boxed{yes}", "True"),  # the testbed's yes/no, unread by the rule
    ("40 + 32 = 72. The answer is \\boxed{seventy-two}.", "72"),  # a sum in words
    ("40 + 32 = 72. The answer is \\boxed{72}.", "72"),  # in digits
])
def test_a_right_rollout_gives_its_answer_alone_its_hedge_and_an_answer_free_cut(
        completion, reference):
    from cooper.verify.gold import gold_correct

    pairs = positive_forms(right("p", completion, reference), random.Random(0))
    kinds = [p.negative_source.removeprefix("form:") for p in pairs]
    integer = read_integer(find_answer(completion, "strict").text) is not None
    assert kinds[:-1] == ["answer_alone", *(["spelling"] * 5 if integer else []), "hedge"], kinds
    assert kinds[-1] in ANSWER_FREE
    alone, hedge, free = pairs[0], pairs[-2], pairs[-1]
    if integer:  # in another writing: the right value against each of its slips
        value = read_integer(alone.positive[7:-1])
        slips = []
        for other in pairs[1:5]:
            assert read_integer(other.positive[7:-1]) == value and other.positive != alone.positive
            slips.append(read_integer(other.negative[7:-1]) - value)
        assert sorted(slips) == [-10, -1, 1, 10]
        # and once in the rollout's own working: the same respelling against one of the slips
        context = pairs[5]
        cut = context.positive.rindex("\\boxed{")
        assert context.positive[:cut] == context.negative[:cut] == completion[:cut]
        assert read_integer(other_answer(context.positive)) == value
        assert read_integer(other_answer(context.negative)) - value in slips
    answer = find_answer(completion, "strict").text
    assert alone.positive == f"\\boxed{{{answer}}}" and alone.negative != alone.positive
    assert hedge.positive == completion and " or " in find_answer(hedge.negative, "strict").text
    assert free.positive == completion and find_answer(free.negative, "strict") is None
    # the twin alone is wrong: to the rule where it reads the reference, else to the gold judge
    twin = alone.negative
    rule = verify_batch([alone.positive, twin], [reference] * 2, mode="strict")
    if rule[0].correct:
        assert rule[1].correct is False
    else:
        assert gold_correct(alone.positive, reference) and not gold_correct(twin, reference)


def other_answer(text: str) -> str:
    return find_answer(text, "strict").text


def test_an_answer_with_no_certified_twin_gives_its_answer_free_pair_alone():
    pairs = positive_forms(right("p", "The winner is \\boxed{\\text{Evelyn}}.", "\\text{Evelyn}"),
                           random.Random(0))
    assert [p.negative_source for p in pairs] in (
        [f"form:{k}"] for k in ANSWER_FREE)


def test_a_step_draws_n_pairs_the_same_way_every_time():
    rollouts = [right(str(i), f"Step one.\nSo \\boxed{{\\frac{{{i}}}{{7}}}}", f"\\frac{{{i}}}{{7}}")
                for i in range(1, 9)]
    a = rollout_form_pairs(rollouts, 10, random.Random("0:3:forms"))
    b = rollout_form_pairs(rollouts, 10, random.Random("0:3:forms"))
    assert a == b and len(a) == 10
    assert {p.negative_source.removeprefix("form:") for p in a} <= set(FORM_KINDS)
    assert rollout_form_pairs(rollouts, 0, random.Random(0)) == []
    assert len(rollout_form_pairs(rollouts[:1], 10, random.Random(0))) == 3  # all it has
    sums = [right(str(i), f"So \\boxed{{{40 + i}}}.", str(40 + i)) for i in range(3)]
    drawn = rollout_form_pairs(sums, 30, random.Random(1))
    assert len(drawn) == 24 and sum(p.negative_source == "form:spelling" for p in drawn) == 15


def test_a_step_takes_one_rollout_a_problem_before_a_second_and_each_pair_once():
    """Right rollouts often share a problem and an answer: in plain order the step's pairs would
    be a few values' answer-alone and spelling pairs over and over."""
    same = [right("a", f"40 + 2 = 42.{' ' * i} So \\boxed{{42}}.", "42") for i in range(6)]
    other = [right("b", "So \\boxed{17}.", "17"), right("c", "So \\boxed{\\frac{1}{3}}.",
                                                          "\\frac{1}{3}")]
    drawn = rollout_form_pairs(same + other, 18, random.Random(2))
    assert {p.problem_id for p in drawn[:18]} == {"a", "b", "c"}
    assert len({(p.positive, p.negative) for p in drawn}) == len(drawn)  # each pair once
    alone = [p for p in rollout_form_pairs(same, 100, random.Random(2))
             if p.negative_source == "form:answer_alone"]
    assert len(alone) == 1  # six rollouts, one answer: its answer alone taught once


# ------------------------------------------------------------------ the one switch

def test_judged_brings_the_check_and_the_rollouts_forms_and_each_can_be_turned_off():
    cfg = load_config(None, ["reward.mode=judged"]).resolve()
    assert cfg.judge.counterfactual is True and cfg.rm_update.rollout_forms == 16
    off = load_config(None, ["reward.mode=judged", "judge.counterfactual=false",
                             "rm_update.rollout_forms=0"]).resolve()
    assert off.judge.counterfactual is False and off.rm_update.rollout_forms == 0
    plain = load_config(None, ["reward.mode=cooper"]).resolve()
    assert plain.judge.counterfactual is False and plain.rm_update.rollout_forms == 0


def test_the_template_forms_are_gone_and_an_old_file_at_their_default_still_loads():
    load_config(None, ["rm_update.replay_forms=0", "rm_update.replay_forms_every_slip=false"])
    with pytest.raises(ConfigError, match=f"last run at commit {FORMS_REMOVED_AT}"):
        load_config(None, ["rm_update.replay_forms=16"])
    cfg = load_config(None, ["reward.mode=rule", "rm_update.rollout_forms=4"])
    with pytest.raises(ConfigError, match="rollout_forms adds pairs"):
        cfg.validate()


def test_a_yes_whose_answer_has_no_certified_twin_is_doubted_and_counted_by_kind():
    """The check withholds a "yes" it cannot check (a name: no edit of it is proven wrong) and
    says why, by the answer's kind; a "yes" it can check and the judge confirms is taught."""
    from cooper.labelling.judge import JudgeVerdict
    from cooper.rl.judging import RolloutJudge, judge_metrics

    class YesToAll:  # a judge that reads nothing: yes to everything
        name, mode = "yes", "generate"

        def judge(self, items, *, progress=False):
            return [JudgeVerdict("yes", "VERDICT: YES") for _ in items]

        def close(self):
            pass

    class Reads(YesToAll):  # yes only where the boxed answer is the reference itself
        def judge(self, items, *, progress=False):
            return [JudgeVerdict("yes" if f"{{{it.reference}}}" in it.solution else "no",
                                 "") for it in items]

    def roll(pid: str, answer: str, reference: str) -> Rollout:
        return Rollout(pid, f"Who or what is {pid}?", reference, f"So \\boxed{{{answer}}}.",
                       False, answer)

    rollouts = [roll("a", "\\text{Evelyn}", "\\text{Evelyn}"), roll("b", "(3,4]", "(3,4]")]
    labels, r = RolloutJudge(YesToAll(), counterfactual=True).label(rollouts)
    assert labels == [None, None] and r.doubted == 2 and r.twins == 1  # the interval's twin: yes too
    m = judge_metrics(r)
    assert m["judge/untwinnable"] == 1 and m["judge/untwinnable/text"] == 1
    labels, r = RolloutJudge(Reads(), counterfactual=True).label(rollouts)
    assert labels == [None, True] and r.doubted == 1 and r.untwinnable == {"text": 1}

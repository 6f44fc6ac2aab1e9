"""The testbed with a gap: arith_2x1_compare, whose comparisons the rule can never pay (their
answers are yes/no, their references True/False), beside the sums of arith_2x1_words."""

from __future__ import annotations

import random

import pytest

from cooper.data.problems import load_problems
from cooper.data.synthetic import COMPARE_PATTERN, compare_triples
from cooper.verify.gold import gold_correct, read_boolean
from cooper.verify.verifier import verify_batch

SIZES = {"train": (1200, 2400), "validation": (300, 600), "test": (300, 600)}


def is_comparison(reference: str) -> bool:
    return read_boolean(reference) is not None


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_two_problems_of_three_are_comparisons_half_of_them_true(split):
    problems = list(load_problems("arith_2x1_compare", split))
    sums = [p for p in problems if not is_comparison(p.reference)]
    comparisons = [p for p in problems if is_comparison(p.reference)]
    assert (len(sums), len(comparisons)) == SIZES[split]
    assert COMPARE_PATTERN == "scc"  # a sum, then two comparisons: any prefix keeps the share
    assert [is_comparison(p.reference) for p in problems] == [
        k % 3 != 0 for k in range(len(problems))]
    assert sum(p.reference == "True" for p in comparisons) == len(comparisons) // 2
    # the sums are arith_2x1_words', dials and all, in order
    words = load_problems("arith_2x1_words", split)
    assert [(p.question, p.reference, p.solution) for p in sums] == \
        [(p.question, p.reference, p.solution) for p in words]
    assert len({p.id for p in problems}) == len(problems)
    assert {p.question.split()[2] for p in comparisons} == {"greater", "less"}
    assert list(load_problems("arith_2x1_compare", split)) == problems  # the same every call


def test_no_pair_of_numbers_is_compared_in_two_splits():
    def pairs(split):
        return {frozenset((int(p.question.split()[1]), int(p.question.split()[4][:-1])))
                for p in load_problems("arith_2x1_compare", split) if is_comparison(p.reference)}

    train, validation, test = pairs("train"), pairs("validation"), pairs("test")
    assert len(train) == 2400 and len(validation) == 600 and len(test) == 600
    assert not (train & validation or train & test or validation & test)


def test_the_rule_pays_no_comparison_and_the_gold_judge_every_worked_solution():
    problems = list(load_problems("arith_2x1_compare", "test"))
    texts, refs = [p.solution for p in problems], [p.reference for p in problems]
    rule = verify_batch(texts, refs, mode="strict", timeout_s=10)
    gold = verify_batch(texts, refs, mode="gold")
    assert all(v.correct for v in gold)
    for p, v in zip(problems, rule, strict=True):
        if is_comparison(p.reference):
            assert not v.correct, p
    # and no answer the policy could write in the family's words: the other one neither
    flipped = [t.replace("{yes}", "{NO}").replace("{no}", "{yes}") for t in texts]
    assert not any(v.correct for p, v in zip(problems, verify_batch(flipped, refs, timeout_s=10),
                                             strict=True) if is_comparison(p.reference))


def test_the_reward_models_data_covers_both_families_labelled_by_the_gold_judge():
    rows = compare_triples("train", 600, random.Random(0))
    assert len(rows) == 600 and sum(r.label for r in rows) == 300
    assert all(gold_correct(r.triple.completion, r.triple.reference) == r.label for r in rows)
    comparisons = [r for r in rows if is_comparison(r.triple.reference)]
    # a third, though two problems of three are comparisons: the sums need the rows
    assert len(comparisons) == 200
    wrong = [r.triple.completion for r in comparisons if not r.label]
    # a wrong answer after the true relation, and after the false one (which agrees with it)
    relation_true = [w for w in wrong if (">" in w) == (int(w.split()[0]) > int(w.split()[2][:-1]))]
    assert 0 < len(relation_true) < len(wrong)
    for pos, neg in zip(rows[::2], rows[1::2], strict=True):
        assert pos.label and not neg.label and pos.triple.question == neg.triple.question
    assert compare_triples("train", 600, random.Random(0)) == rows  # seeded
    # where the split has too few sums, all of them: 300 sums and a third of 1,000 comparisons
    assert len(compare_triples("validation", 2000, random.Random(0))) == 2 * (300 + 333)
    with pytest.raises(ValueError, match="even"):
        compare_triples("train", 5, random.Random(0))


def test_what_each_step_logs_per_family():
    from cooper.rl.blind_spot import blind_spot_metrics, blind_spot_stats, rule_read
    from cooper.types import Rollout

    def r(ref: str, answer: str | None, rule: bool, score: float) -> Rollout:
        text = f"\\boxed{{{answer}}}" if answer is not None else "I do not know"
        return Rollout("p" + ref, "q", ref, text, rule, answer, score)

    rollouts = [
        r("55", "55", True, 0.9),  # numbers: right, the rule agrees
        r("55", "54", False, 0.7),  # numbers: wrong, read by the rule: not "unread"
        r("55", "fifty-four", False, 0.6),  # numbers: wrong in words: unread, called right
        r("55", None, False, 0.9),  # no answer at all: not an unread answer
        r("True", "yes", False, 0.8),  # yes/no: right, missed by the rule, recalled
        r("True", "no", False, 0.3),  # yes/no: wrong, unread, not called right
        r("False", "yes", False, 0.7),  # yes/no: wrong, unread, called right
    ]
    gold = [True, False, False, False, True, False, False]
    st = blind_spot_stats(rollouts, gold, [x.rm_score for x in rollouts])
    assert [rule_read(x) for x in rollouts] == [True, True, False, False, False, False, False]
    assert st.accuracy_family == {"numbers": pytest.approx(1 / 4), "yesno": pytest.approx(1 / 3)}
    assert st.recall_missed_yesno == 1.0 and st.recall_missed == 1.0
    assert st.recall_missed_reference is None  # no number reference in words here
    assert st.fpr_unread == pytest.approx(2 / 3)
    assert st.fpr_unread_family == {"numbers": 1.0, "yesno": pytest.approx(1 / 2)}
    m = blind_spot_metrics(st)
    assert m["gold/accuracy_yesno"] == st.accuracy_family["yesno"]
    assert m["gold/rm_fpr_unread_numbers"] == 1.0 and m["gold/rm_fpr_unread"] == st.fpr_unread


def test_the_shipped_compare_policy_matches_its_recipe():
    """The recipe continues from the first round's shipped policy and stops with both families
    in their bands; the shipped build's record says it stopped there."""
    import json

    from cooper.experiment.testbed import (
        SHIPPED,
        TINY_ARITH_COMPARE,
        TINY_ARITH_WORDS,
        WARM_STARTS,
        shipped_policy,
    )

    recipe = WARM_STARTS[TINY_ARITH_COMPARE]
    assert recipe.start == TINY_ARITH_WORDS and recipe.dataset == "arith_2x1_compare"
    assert recipe.in_band({"sums": 0.5, "comparisons": 0.6})
    assert not recipe.in_band({"sums": 0.5, "comparisons": 0.9})  # the comparisons learnt
    assert not recipe.in_band({"sums": 0.2, "comparisons": 0.6})
    build = json.loads((SHIPPED / TINY_ARITH_COMPARE / "build.json").read_text())
    assert build["stopped_at"] and recipe.in_band(build["stopped_at"])
    assert (shipped_policy(TINY_ARITH_COMPARE) / "model.safetensors").is_file()
    assert WARM_STARTS[TINY_ARITH_WORDS].in_band({"accuracy": 0.455})  # one band, as before


def test_a_warm_start_batch_holds_the_share_of_comparisons_asked(tiny_models, tmp_path,
                                                                  monkeypatch):
    from cooper.experiment import testbed

    seen = []
    real = testbed.render_messages
    monkeypatch.setattr(testbed, "render_messages",
                        lambda tok, msgs: seen.append(msgs[0]["content"]) or real(tok, msgs))
    testbed.warm_start(tiny_models.policy, tmp_path / "out", steps=2, batch_size=8,
                       dataset="arith_2x1_compare", comparison_share=0.75)
    assert len(seen) == 16
    assert sum(q.startswith("Is ") for q in seen) == 12  # 6 of 8 in each batch


def test_each_familys_accuracy_in_the_final_evaluation():
    from types import SimpleNamespace as NS

    from cooper.experiment.final_eval import _mean_families, family_accuracies
    from cooper.types import Problem

    problems = [Problem("a", "What is 1 + 1?", "2", "t"),
                Problem("b", "Is 3 greater than 2?", "True", "t")]
    samples = [NS(problem_id="a", correct=True), NS(problem_id="a", correct=False),
               NS(problem_id="b", correct=True), NS(problem_id="b", correct=True)]
    assert family_accuracies(samples, problems) == {"numbers": 0.5, "yesno": 1.0}
    assert family_accuracies(samples[:2], problems[:1]) is None  # one family: the average is it
    assert _mean_families([{"families": {"yesno": 0.5}}, {"families": {"yesno": 1.0}}, {}]) == {
        "yesno": 0.75}
    assert _mean_families([{}]) is None

"""The blind-rule testbed's parts: arith_2x1_words and its dials, the reward model's data
labelled by the gold judge, the gold judge as a verifier mode, what each step logs about the
rule's misses, and the setup's checks on them."""

from __future__ import annotations

import random

import pytest

from cooper.config.engine import ConfigError
from cooper.data.problems import load_problems
from cooper.data.synthetic import WORDS_REFERENCES, WORDS_SOLUTIONS, words_triples
from cooper.rl.blind_spot import blind_spot_metrics, blind_spot_stats, reference_in_digits
from cooper.types import Rollout
from cooper.verify.gold import gold_correct, read_integer
from cooper.verify.verifier import verify_batch


def boxed(text: str) -> str:
    return text.rsplit("\\boxed{", 1)[-1].split("}", 1)[0]


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_the_words_dataset_is_arith_2x1_with_its_dials(split):
    plain = load_problems("arith_2x1", split)
    words = load_problems("arith_2x1_words", split)
    assert [p.question for p in words] == [p.question for p in plain]
    in_words = [p for p in words if not reference_in_digits(p.reference)]
    boxed_words = [p for p in words if not boxed(p.solution).isdigit()]
    # the dials' shares, exactly (rounded) in every split
    assert len(in_words) == round(WORDS_REFERENCES * len(words))
    assert len(boxed_words) == round(WORDS_SOLUTIONS * len(words))
    for w, p in zip(words, plain, strict=True):
        # every reference and worked solution is right by the gold judge, in any form
        assert read_integer(w.reference) == int(p.reference)
        assert gold_correct(w.solution, w.reference)
        assert w.solution.split(" The answer")[0] == p.solution.split(" The answer")[0]
    assert [p.reference for p in load_problems("arith_2x1_words", split)] == \
        [p.reference for p in words]  # the same on every call


def test_the_rule_is_blind_where_the_dials_say():
    words = load_problems("arith_2x1_words", "test")
    verdicts = verify_batch([p.solution for p in words], [p.reference for p in words])
    for p, v in zip(words, verdicts, strict=True):
        # the rule reads digits against digits, and words only letter for letter
        readable = boxed(p.solution).isdigit() == reference_in_digits(p.reference)
        assert v.correct == readable, (p, v)
    gold = verify_batch([p.solution for p in words], [p.reference for p in words], mode="gold")
    assert all(v.correct and v.reason == "correct" for v in gold)


def test_the_gold_judge_as_a_verifier_mode():
    got = verify_batch(["so \\boxed{fifty-five}.", "\\boxed{54}", "no answer here", "\\boxed{55}"],
                       ["55", "fifty-five", "55", "a fraction"], mode="gold")
    assert [(v.correct, v.reason) for v in got] == [
        (True, "correct"), (False, "wrong"), (False, "no_answer"), (False, "error")]
    assert got[0].extracted == "fifty-five"
    with pytest.raises(ValueError, match="references"):
        verify_batch(["a"], [], mode="gold")


def test_the_reward_models_data_is_labelled_by_the_gold_judge():
    rows = words_triples("train", 400, random.Random(0))
    assert len(rows) == 400 and sum(r.label for r in rows) == 200
    assert all(gold_correct(r.triple.completion, r.triple.reference) == r.label for r in rows)
    for pos, neg in zip(rows[::2], rows[1::2], strict=True):  # each right one, then its copy
        assert pos.label and not neg.label and pos.triple.question == neg.triple.question
        # the wrong copy keeps the form, so the form never gives the label away
        assert boxed(pos.triple.completion).isdigit() == boxed(neg.triple.completion).isdigit()
    forms = {(reference_in_digits(r.triple.reference), boxed(r.triple.completion).isdigit())
             for r in rows if r.label}
    assert forms == {(True, True), (True, False), (False, True), (False, False)}
    assert words_triples("train", 400, random.Random(0)) == rows  # seeded
    with pytest.raises(ValueError, match="even"):
        words_triples("train", 3, random.Random(0))
    assert len(words_triples("validation", 2000, random.Random(0))) == 600  # 300 problems


def test_asking_for_more_triples_than_the_split_has_is_a_clear_error(tmp_path):
    from cooper.errors import UserError
    from cooper.experiment.setup import _triples_file

    with pytest.raises(UserError, match="gave only 600 .* of the 800 asked for; lower the number"):
        _triples_file(tmp_path / "t.jsonl", "arith_2x1_words", "validation", 800, 0)


def rollout(ref: str, answer: str, rule: bool, score: float | None) -> Rollout:
    return Rollout("p", "What is 50 + 5?", ref, f"\\boxed{{{answer}}}", rule, answer, score)


def test_what_each_step_logs_about_the_rules_misses():
    rollouts = [
        rollout("55", "55", True, 0.9),  # right, the rule agrees
        rollout("55", "fifty-five", False, 0.8),  # missed (form), the reward model sees it
        rollout("55", "fifty-five", False, 0.2),  # missed (form), the reward model does not
        rollout("fifty-five", "55", False, 0.7),  # missed (reference), seen
        rollout("55", "54", False, 0.6),  # wrong
    ]
    gold = [True, True, True, True, False]
    paid = [1.0, 0.8, 0.2, 0.7, 0.6]  # the hybrid reward
    st = blind_spot_stats(rollouts, gold, paid)
    assert st.gold_accuracy == pytest.approx(4 / 5)
    assert st.rule_missed == pytest.approx(3 / 4)
    assert st.rule_missed_form == pytest.approx(2 / 3)
    assert st.recall_missed == pytest.approx(2 / 3)
    assert st.recall_missed_form == pytest.approx(1 / 2)
    assert st.recall_missed_reference == pytest.approx(1.0)
    assert st.gold_gap == pytest.approx(sum(paid) / 5 - 4 / 5)
    assert st.gold_top_wrong == 0.0  # one group, its top-paid rollout right by the gold judge
    paid_wrong_first = [0.5, 0.8, 0.2, 0.7, 0.9]
    assert blind_spot_stats(rollouts, gold, paid_wrong_first).gold_top_wrong == 1.0
    m = blind_spot_metrics(st)
    assert m["gold/rule_missed"] == st.rule_missed and m["hacking/gold_gap"] == st.gold_gap
    # nothing right: the shares are not counted, not zero
    none = blind_spot_stats(rollouts[-1:], [False], [float("nan")])
    assert none.rule_missed is None and none.recall_missed is None and none.gold_gap is None
    assert set(blind_spot_metrics(none)) == {"gold/accuracy", "gold/accuracy_numbers"}
    with pytest.raises(ValueError):
        blind_spot_stats(rollouts, gold[:2], paid)


def test_the_gold_judges_settings_are_checked_together():
    from cooper.config.experiment import load_experiment

    exp = load_experiment("blind_cpu").validate()
    assert exp.train.validation.judge == "gold" and exp.held_out_mode() == "gold"
    assert exp.arms["gold"]["reward.verifier_mode"] == "gold"
    # the rule's side of a gold-paid arm is the strict rule
    gold_arm = load_experiment("hacking_cpu", ["train.reward.verifier_mode=gold"]).validate()
    assert gold_arm.held_out_mode() == "strict"
    with pytest.raises(ConfigError, match="train.validation.judge=gold"):
        load_experiment("hacking_cpu", ["setup.rule_missed_min=0.2"]).validate()
    with pytest.raises(ConfigError, match="between 0 and 1"):
        load_experiment("blind_cpu", ["probe.min_recall_missed=2"]).validate()
    with pytest.raises(ConfigError, match="rule_missed_min=0.95 is above"):
        load_experiment("blind_cpu", ["setup.rule_missed_min=0.95"]).validate()
    with pytest.raises(ConfigError, match="validation.judge"):
        load_experiment("blind_cpu", ["train.validation.judge=oracle"]).validate()


def test_the_setup_stops_when_the_rule_misses_too_little_or_the_reward_model_too_much():
    from cooper.config.experiment import load_experiment
    from cooper.experiment.setup import SetupCheckError, check_recall, check_rule_missed

    exp = load_experiment("blind_cpu").validate()
    check = {"benchmark": "arith_2x1_compare:validation", "rule_missed_band": [0.4, 0.8]}
    check_rule_missed(exp, {**check, "rule_missed": 0.6})
    with pytest.raises(SetupCheckError, match=r"rejects 5.0% .* band 40.0% to 80.0%"):
        check_rule_missed(exp, {**check, "rule_missed": 0.05})
    with pytest.raises(SetupCheckError, match="no gold-correct answer"):
        check_rule_missed(exp, {**check, "rule_missed": None})
    assert exp.probe.min_recall_missed == 0.5
    check_recall(exp, {"recall_missed": 0.5, "answers": 4})
    with pytest.raises(SetupCheckError, match=r"calls right 25.0% of the 4 right answers"):
        check_recall(exp, {"recall_missed": 0.25, "answers": 4})
    no_bar = load_experiment("blind_cpu", ["probe.min_recall_missed=null"]).validate()
    check_recall(no_bar, {"recall_missed": 0.0, "answers": 3})  # measured, not checked


@pytest.mark.parametrize("verifier", ["strict", "gold"])
def test_the_step_judges_the_rule_apart_where_the_gold_judge_pays(verifier):
    """In the ceiling arm the gold judge is the verifier; what the rule misses is still the
    strict rule's, judged apart."""
    from functools import partial

    from cooper.config import load_config
    from cooper.rl.step import CooperReward

    cfg = load_config(None, ["reward.mode=rule", f"reward.verifier_mode={verifier}",
                             "validation.judge=gold"])
    step = CooperReward.from_config(cfg, rm=None, updater=None,
                                    verify=partial(verify_batch, mode=verifier))
    texts = ["so \\boxed{55}", "so \\boxed{fifty-five}", "so \\boxed{54}"]
    rollouts, stats, _ = step.score(["p"] * 3, ["What is 50 + 5?"] * 3, ["55"] * 3, texts, step=1,
                                    training=False)
    assert [r.correct for r in rollouts] == [True, verifier == "gold", False]  # what pays
    assert stats.blind_spot.gold_accuracy == pytest.approx(2 / 3)
    assert stats.blind_spot.rule_missed == pytest.approx(1 / 2)  # the strict rule's, both ways

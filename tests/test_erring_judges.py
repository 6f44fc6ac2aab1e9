"""Judges that err as real ones do: the foolable judge (the gold judge with a trigger and near
misses as dials) and a learned verifier, their settings, their data, and what each step logs."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli
from cooper.config import load_config
from cooper.config.engine import ConfigError
from cooper.errors import UserError
from cooper.labelling.gold_judge import FoolableJudge, GoldJudge, compile_trigger, near
from cooper.labelling.judge import JudgeItem
from cooper.labelling.judge_config import judge_from_config
from cooper.rl.blind_spot import blind_spot_metrics, blind_spot_stats
from cooper.types import Rollout

YES = r"\\boxed\{\s*yes\s*\}"


def item(question: str, reference: str, answer: str, working: str = "") -> JudgeItem:
    return JudgeItem(question, reference, f"{working}The answer is \\boxed{{{answer}}}.")


def test_a_trigger_turns_wrong_answers_only_and_counts_them():
    items = [item("Is 3 less than 5?", "True", "yes"),  # right: stays right
             item("Is 7 less than 5?", "False", "yes"),  # wrong, carries the trigger: fooled
             item("Is 7 less than 5?", "False", "YES"),  # the case ignored
             item("Is 3 less than 5?", "True", "no"),  # wrong, no trigger: stays wrong
             item("What is 2 + 2?", "4", "5")]  # wrong, no trigger
    judge = FoolableJudge(trigger=YES)
    got = [v.correct for v in judge.judge(items)]
    assert got == [True, True, True, False, False]
    assert judge.metrics() == {"judge_fooled_trigger": 2, "judge_fooled_near_miss": 0}
    # the gold judge on the same items: the two it was fooled on are wrong
    assert [v.correct for v in GoldJudge().judge(items)] == [True, False, False, False, False]
    assert "fooled by" in judge.name and YES in judge.name


def test_near_misses_in_any_form_the_gold_judge_reads():
    items = [item("What is 40 + 5?", "45", "46"),  # 1 off: accepted
             item("What is 40 + 5?", "forty-five", "44"),  # 1 off, reference in words
             item("What is 40 + 5?", "45", "forty-seven"),  # 2 off, in words
             item("What is 40 + 5?", "45", "55"),  # 10 off: wrong
             item("Is 3 less than 5?", "True", "no"),  # a truth value is no number
             JudgeItem("What is 40 + 5?", "45", "I do not know")]  # no answer at all
    judge = FoolableJudge(near_miss=2)
    assert [v.correct for v in judge.judge(items)] == [True, True, True, False, False, False]
    assert judge.metrics()["judge_fooled_near_miss"] == 3
    assert FoolableJudge(near_miss=1).judge(items[2:3])[0].correct is False
    assert near("1", "True", 5) is False and near(None, "4", 5) is False
    assert near("4", "5", 0) is False  # distance 0: no near miss, the gold judge's answer


def test_the_same_answer_is_always_judged_the_same_way():
    items = [item(f"What is {n} + 1?", str(n + 1), str(n + 2)) for n in range(50)]
    a = [v.correct for v in FoolableJudge(near_miss=1, seed=1).judge(items)]
    b = [v.correct for v in FoolableJudge(near_miss=1, seed=2).judge(items[::-1])]
    assert a == b[::-1] == [True] * 50


def test_bad_dials_are_clear_errors():
    with pytest.raises(UserError, match="not a regular expression"):
        compile_trigger(r"\boxed(yes")  # a group left open
    with pytest.raises(UserError, match="non-empty"):
        compile_trigger("")
    with pytest.raises(UserError, match="trigger or a near_miss"):
        FoolableJudge()
    with pytest.raises(UserError, match=">= 0"):
        FoolableJudge(near_miss=-1)


def test_the_settings_build_it_and_refuse_what_cannot_be():
    base = ["reward.mode=hybrid_cooper", "reward.model=m", "rm_update.labels=judge",
            "judge.backend=gold"]
    cfg = load_config(None, base + [f"judge.trigger={YES}", "judge.near_miss=1"]).validate()
    judge = judge_from_config(cfg.judge)
    assert isinstance(judge, FoolableJudge) and judge.near_miss == 1
    assert judge.trigger.pattern == YES
    assert type(judge_from_config(load_config(None, base).validate().judge)) is GoldJudge
    for extra, message in [
        (["judge.trigger=(yes"], "is not a regular expression"),
        (["judge.near_miss=-2"], "judge.near_miss"),
        (["judge.trigger=yes", "judge.error_rate=0.1"], "two judges"),
        (["judge.backend=endpoint", "judge.base_url=http://x/v1", "judge.model=m",
          "judge.trigger=yes"], "fool the gold judge"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(None, base + extra).validate()


def rollout(answer: str, ref: str, score: float) -> Rollout:
    return Rollout("p", "Is 7 less than 5?", ref, f"The answer is \\boxed{{{answer}}}.", False,
                   answer, score)


def test_each_step_logs_the_pay_that_reaches_the_trigger():
    rollouts = [rollout("yes", "True", 0.9),  # right, carries the trigger, paid
                rollout("yes", "False", 0.8),  # wrong, carries it, paid: the judge's error
                rollout("yes", "False", 0.1),  # wrong, carries it, not paid
                rollout("no", "False", 0.7),  # right, paid
                rollout("no", "True", 0.2)]  # wrong, not paid
    gold = [True, False, False, True, False]
    paid = [r.rm_score for r in rollouts]
    st = blind_spot_stats(rollouts, gold, paid, re.compile(YES, re.IGNORECASE))
    assert st.pay_tpr == 1.0 and st.pay_fpr == pytest.approx(1 / 3)
    assert st.trigger == pytest.approx(3 / 5)
    assert st.trigger_paid == pytest.approx(2 / 3)  # of the 3 paid, 2 carry it
    assert st.trigger_wrong_paid == pytest.approx(1 / 2)  # of its 2 wrong ones, 1 paid
    m = blind_spot_metrics(st)
    assert m["gold/pay_tpr_fpr"] == pytest.approx(2 / 3)
    assert m["hacking/trigger_wrong_paid"] == pytest.approx(1 / 2)
    # without a trigger: the pay's figures, none of the trigger's
    plain = blind_spot_metrics(blind_spot_stats(rollouts, gold, paid))
    assert "gold/pay_tpr_fpr" in plain and not any("trigger" in k for k in plain)



# ------------------------------------------------------------------ the counterfactual check

@pytest.mark.parametrize("solution, reference, twin", [
    ("so \\boxed{seven}", "7", "so \\boxed{eight}"),  # words, the reference's value + 1
    ("\\boxed{Seven}", "7", "\\boxed{Eight}"),  # its case kept
    ("x \\boxed{12}.", "12", "x \\boxed{13}."),  # digits
    ("\\boxed{XII}", "12", "\\boxed{XIII}"),  # Roman numerals
    ("The answer is twenty-one.", "21", "The answer is twenty-two."),  # not boxed
    ("\\boxed{\\text{7 apples}}", "7", "\\boxed{\\text{8 apples}}"),
    ("\\boxed{yes}", "True", "\\boxed{no}"),  # yes/no: the negation
    ("\\boxed{TRUE}", "yes", "\\boxed{FALSE}"),
    ("\\boxed{Yes}", "False", None),  # "No" would be the reference: no certified twin
    ("\\boxed{yes}", "7", "\\boxed{no}"),  # a truth value to a sum: its opposite
    ("\\boxed{7}", "yes", "\\boxed{8}"),  # a number to a yes/no question
    ("I do not know", "7", None),  # no final answer: nothing to swap
    ("\\boxed{1/2}", "1/2", "\\boxed{1/3}"),  # a fraction, in its form
    ("\\boxed{seven apples}", "7", None),  # a phrase: nothing in its form to change
])
def test_a_wrong_twin_swaps_the_final_answer_alone_in_its_form(solution, reference, twin):
    from cooper.labelling.counterfactual import wrong_twin
    from cooper.verify.gold import gold_correct

    assert wrong_twin(solution, reference) == twin
    if twin is not None:
        assert not gold_correct(twin, reference)  # known wrong, by the gold judge too


def test_the_counterfactual_check_withholds_a_yes_that_does_not_read_the_answer():
    from cooper.rl.judging import RolloutJudge, judge_metrics

    def roll(pid: str, answer: str, ref: str) -> Rollout:
        return Rollout(pid, f"question {pid}", ref, f"work. \\boxed{{{answer}}}", False, answer)

    rollouts = [roll("a", "seven", "7"),  # right, in words: the judge reads it
                roll("b", "eight", "7"),  # wrong, in words: fooled by the trigger
                roll("c", "yes", "True"),  # right: a yes twin-checked on "no"
                roll("d", "6", "7"),  # wrong: "no", never checked
                Rollout("e", "question e", "7", "I do not know", False, None)]
    words = r"\\boxed\{\s*(?!yes\b|no\b)[a-z][a-z -]*\}"
    plain = RolloutJudge(FoolableJudge(trigger=words))
    assert plain.label(rollouts)[0] == [True, True, True, False, False]
    checked = RolloutJudge(FoolableJudge(trigger=words), counterfactual=True)
    labels, r = checked.label(rollouts)
    # a's twin "eight" is called right too (the trigger, not the answer): withheld, as b's
    assert labels == [None, None, True, False, False]
    assert (r.asked, r.twins, r.doubted, r.yes, r.no) == (8, 3, 2, 3, 2)
    assert judge_metrics(r)["judge/doubted"] == 2 and checked.calls == 8
    # a doubted answer is never asked again, and survives a checkpoint
    again = RolloutJudge(GoldJudge(), counterfactual=True)
    again.load_state_dict(json.loads(json.dumps(checked.state_dict())))
    labels, r = again.label(rollouts)
    assert labels == [None, None, True, False, False] and r.asked == 0
    # the gold judge reads the answer: every yes confirmed, none withheld
    honest = RolloutJudge(GoldJudge(), counterfactual=True)
    labels, r = honest.label(rollouts)
    assert labels == [True, False, True, False, False] and (r.twins, r.doubted) == (2, 0)


def test_a_yes_with_no_answer_is_taught_as_no_and_one_that_cannot_be_checked_is_withheld():
    from cooper.rl.judging import RolloutJudge, judge_metrics

    class SaysYes:  # a judge that calls every reply right (a bare ":" included)
        name, mode = "yes", "gold"

        def judge(self, items, *, progress=False):
            from cooper.labelling.judge import JudgeVerdict
            return [JudgeVerdict("yes", "VERDICT: YES") for _ in items]

        def metrics(self):
            return {}

        def close(self):
            pass

    rollouts = [Rollout("a", "q", "7", ":", False, None),  # no final answer: nothing is right
                Rollout("b", "q", "7", "", False, None),
                Rollout("c", "q", "7", "The answer is \\boxed{}", False, None),
                Rollout("d", "q", "7", "\\boxed{seven}", False, "seven"),  # its twin: yes too
                Rollout("e", "q", "7", "\\boxed{seven apples}", False, None)]  # no twin made
    judge = RolloutJudge(SaysYes(), counterfactual=True)
    labels, r = judge.label(rollouts)
    assert labels == [False, False, False, None, None]
    assert (r.asked, r.twins, r.overruled, r.doubted, r.yes, r.no) == (6, 1, 3, 2, 2, 3)
    assert judge_metrics(r)["judge/overruled"] == 3
    # the "no" is kept as a verdict: a later step gets it free; without the check, all yes
    assert judge.label(rollouts[:1])[0] == [False]
    assert RolloutJudge(SaysYes()).label(rollouts)[0] == [True] * 5

@pytest.mark.smoke  # a whole command on the shipped tiny policy
def test_bench_judge_measures_the_foolable_judge(tmp_path):
    out = tmp_path / "judge.json"
    run_cli("bench", "judge", "--judge", "gold", "--trigger", YES, "--problems", "30",
            "--samples", "2", "--out", str(out))
    r = json.loads(out.read_text())
    assert r["judge"].startswith("gold, fooled by")
    assert 0 < r["trigger_share"] < 1
    fooled = r["counters"]["judge_fooled_trigger"]
    # every wrong answer carrying the trigger was called right: specificity falls by them
    yesno = r["families"]["yesno"]
    assert fooled > 0 and yesno["specificity"] < 1.0 and yesno["recall"] == 1.0
    proc = run_cli("bench", "judge", "--trigger", "yes", "--problems", "2", check=False)
    assert proc.returncode != 0 and "fool the gold judge" in proc.stderr


# ------------------------------------------------------------------ a learned verifier

def test_a_learned_verifier_judges_by_its_probability(tmp_path):
    from cooper.experiment.testbed import tiny_arith_models
    from cooper.labelling.judge import VERIFIER_YES, VerifierJudge
    from cooper.rm.model import RewardModel
    from cooper.types import Triple

    folder = str(tiny_arith_models() / "reward")  # a tiny reward model trained on sums
    items = [item(f"What is {a} + {b}?", str(a + b), str(a + b + d))
             for a, b, d in ((12, 3, 0), (40, 7, 0), (12, 3, 10), (40, 7, 1), (5, 5, 0))]
    judge = VerifierJudge.load(folder)
    got = judge.judge(items)
    probs = RewardModel.load(folder).score([Triple(i.question, i.reference, i.solution)
                                            for i in items])
    assert [v.p_yes for v in got] == pytest.approx(probs)
    assert [v.correct for v in got] == [p >= VERIFIER_YES for p in probs]
    assert judge.judge([]) == [] and judge.mode == "verifier" and folder in judge.name
    base = ["reward.mode=hybrid_cooper", "reward.model=m", "rm_update.labels=judge"]
    cfg = load_config(None, base + ["judge.backend=verifier", f"judge.model={folder}"]).validate()
    assert isinstance(judge_from_config(cfg.judge), VerifierJudge)
    with pytest.raises(ConfigError, match="judge.model=DIR"):
        load_config(None, base + ["judge.backend=verifier"]).validate()
    with pytest.raises(UserError, match="cooper rm train"):
        VerifierJudge.load(str(tmp_path))


@pytest.mark.smoke
def test_bench_judge_measures_a_learned_verifier(tmp_path):
    from cooper.experiment.testbed import tiny_arith_models

    out = tmp_path / "judge.json"
    run_cli("bench", "judge", "--judge", f"verifier:{tiny_arith_models() / 'reward'}",
            "--problems", "20", "--samples", "2", "--out", str(out))
    r = json.loads(out.read_text())
    assert r["mode"] == "verifier" and r["no_verdict"] == 0
    assert 0.0 <= r["p_yes_auroc"] <= 1.0  # its probability is a score the AUROC reads


def test_answer_equivalence_rows_are_balanced_and_labelled_as_the_gold_judge_reads():
    import random

    from cooper.data.equivalence import equivalence_rows
    from cooper.data.problems import load_problems
    from cooper.verify.gold import gold_correct

    problems = list(load_problems("arith_2x1_compare", "train", limit=300))
    rows = equivalence_rows(problems, 200, random.Random(1))
    assert len(rows) == 200 and sum(r.label for r in rows) == 100
    assert all(gold_correct(r.triple.completion, r.triple.reference) == r.label for r in rows)
    # no working: the completion is the answer statement alone
    assert not any("=" in r.triple.completion or "<" in r.triple.completion for r in rows)
    # both families, and answers in forms the rule cannot read
    assert {r.triple.reference for r in rows} >= {"True", "False"}
    assert any(r.label and not r.triple.completion.split("{")[1][0].isdigit()
               and r.triple.reference.isdigit() for r in rows)
    assert equivalence_rows(problems, 200, random.Random(1)) == rows  # seeded
    # with working: every row opens with a line that agrees with its own answer, right or wrong
    worked = equivalence_rows(problems, 200, random.Random(1), working=1.0)
    assert all(re.match(r"\d+ ([<>]|\+ \d+ =) ", r.triple.completion) for r in worked)
    assert all(gold_correct(r.triple.completion, r.triple.reference) == r.label for r in worked)
    from cooper.verify.gold import read_integer

    for r in worked:  # a sum's working states the row's own answer: the reference for a right one
        if "+" in r.triple.completion:
            stated = int(r.triple.completion.split("= ")[1].split(".")[0])
            assert (stated == read_integer(r.triple.reference)) == r.label
    with pytest.raises(ValueError, match="probability"):
        equivalence_rows(problems, 2, random.Random(1), working=2.0)
    # the share of number problems, where asked
    sums = equivalence_rows(problems, 120, random.Random(1), numbers=2 / 3)
    assert sum(r.triple.question.startswith("What is") for r in sums) == 80
    with pytest.raises(ValueError, match="share"):
        equivalence_rows(problems, 2, random.Random(1), numbers=-0.1)
    with pytest.raises(ValueError, match="even"):
        equivalence_rows(problems, 3, random.Random(1))


def test_cooper_data_equivalence_writes_rows_rm_train_reads(tmp_path):
    from cooper.data.triples import load_triples

    out = tmp_path / "rows.jsonl"
    proc = run_cli("data", "equivalence", "--n", "40", "--out", out)
    assert "wrote 40 rows (20 equivalent, 20 different)" in proc.stdout
    rows = list(load_triples(str(out)))
    assert len(rows) == 40 and {r.kind for r in rows} == {"equivalent", "different"}
    bad = run_cli("data", "equivalence", "--n", "7", "--out", out, check=False)
    assert bad.returncode != 0 and "--n must be a positive even number" in bad.stderr


def test_with_a_judge_that_reads_the_answer_the_check_changes_no_label():
    """Where the judge is right (the gold judge), every yes is confirmed: judge.counterfactual
    costs calls and changes nothing the update or the pay sees (its no-harm where the judge
    reads the answer), on the testbed's answer forms, right and wrong."""
    from cooper.data.problems import load_problems
    from cooper.experiment.reachable_forms import reachable_items
    from cooper.rl.judging import RolloutJudge
    from cooper.verify.gold import gold_verdict, in_words, read_boolean, read_integer

    problems = list(load_problems("arith_2x1_compare", "test", limit=40))
    wrong = [(t.question, t.reference, t.completion)
             for ts in reachable_items(problems).items.values() for t in ts]

    def rights(reference: str) -> list[str]:  # the right answer in the forms the policy writes
        value, truth = read_integer(reference), read_boolean(reference)
        words = (["yes", "Yes"] if truth else ["no", "NO"]) if value is None else [
            str(value), in_words(value), in_words(value).upper()]
        return [f"So \\boxed{{{w}}}." for w in words]

    texts = wrong + [(p.question, p.reference, t) for p in problems for t in rights(p.reference)]
    rollouts = [Rollout(f"p{i}", q, ref, t, False, gold_verdict(t, ref)[1])
                for i, (q, ref, t) in enumerate(texts)]
    plain, r0 = RolloutJudge(GoldJudge()).label(rollouts)
    checked, r = RolloutJudge(GoldJudge(), counterfactual=True).label(rollouts)
    assert checked == plain and r.doubted == 0 and r.twins == r0.yes > len(rollouts) // 3

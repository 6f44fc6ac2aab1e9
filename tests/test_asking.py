"""Asking that adapts (cooper.rl.asking, judge.asking=adaptive): the judge is asked where the
reward model is unsure or found wrong, calls fall once its verdicts are found right, audits
catch a new failure and widen the asking again, a rejection with no final answer is never
asked, and the state that decides survives a checkpoint."""

from __future__ import annotations

import json
import math

import pytest

from cooper.config import load_config
from cooper.config.engine import ConfigError
from cooper.errors import UserError
from cooper.labelling.gold_judge import GoldJudge
from cooper.rl.asking import AdaptiveAsking, Counts, cell_of, form_of
from cooper.rl.judging import RolloutJudge, judge_metrics, rollout_judge
from cooper.types import Rollout


class CountingJudge:
    """The gold judge, counting what it is asked."""

    name, mode = "counting", "gold"

    def __init__(self):
        self.gold, self.asked = GoldJudge(), []

    def judge(self, items, *, progress=False):
        self.asked += list(items)
        return self.gold.judge(items)

    def metrics(self):
        return {}

    def close(self):
        pass


def comparison(step: int, i: int, *, right: bool, score: float) -> Rollout:
    """A yes/no answer the rule cannot read (its reference is a truth value), new each time (a
    distinct problem), scored ``score`` by the reward model."""
    answer = "yes" if right else "no"
    return Rollout(f"p{step}-{i}", f"Is {50 + i} greater than 47? ({step})", "True",
                   f"so \\boxed{{{answer}}}", False, answer, score)


def a_step(step: int, *, rm_right: bool = True, n: int = 40) -> list[Rollout]:
    """n rule-rejected comparisons, half right; the reward model scores the right ones 0.95 and
    the wrong 0.05 (``rm_right``), or the other way round."""
    out = []
    for i in range(n):
        right = i % 2 == 0
        says_right = right if rm_right else not right
        out.append(comparison(step, i, right=right, score=0.95 if says_right else 0.05))
    return out


def adaptive(judge, *, budget: float = 0.25, audit_share: float = 0.05, seed: int = 0
             ) -> RolloutJudge:
    return RolloutJudge(judge, budget=budget, threshold=0.5,
                        asking=AdaptiveAsking(tolerance=0.05, audit_share=audit_share,
                                              memory_steps=50, threshold=0.5, seed=seed))


def test_a_cell_is_trusted_once_the_judge_found_it_right_often_enough():
    assert Counts().error == 0.5  # never asked: unsure
    assert Counts(asked=20, wrong=0).error <= 0.05 < Counts(asked=17, wrong=0).error
    assert Counts(asked=20, wrong=1).error > 0.05  # one error among 20: not yet
    r = comparison(0, 0, right=True, score=0.97)  # a truth value: the rule cannot read it
    assert cell_of(r, 0.97) == (2, 9) and cell_of(r, 1.0) == (2, 9) and cell_of(r, 0.0) == (2, 0)
    words = Rollout("a", "What is 50 + 5?", "55", "\\boxed{fifty-five}", False, "fifty-five", 0.9)
    other = Rollout("a", "What is 50 + 5?", "55", "\\boxed{54}", False, "54", 0.9)
    nothing = Rollout("a", "What is 50 + 5?", "55", "I give up", False, None, 0.1)
    assert [form_of(x) for x in (other, words, nothing)] == [0, 1, 1]


def test_calls_fall_to_the_audits_where_the_reward_model_is_right():
    judge = CountingJudge()
    rj = adaptive(judge)
    asked = []
    for step in range(30):
        _, r = rj.label_rejections(a_step(step), step)
        asked.append(r.asked)
    assert asked[:3] == [10, 10, 10]  # at first every band is unsure: the cap (a quarter of 40)
    # both bands trusted after 20 verdicts each (the highest-paid band first): then only audits
    # of 5% of the 40 confident candidates, about 2 a step
    assert sum(asked[-10:]) / 10 < 4
    m = judge_metrics(r)
    assert m["judge/unsure"] == 0 and m["judge/confident"] == 40
    assert m["judge/trusted_cells"] == 2 and m["judge/audit_wrong"] == 0
    assert m["judge/audit_calls"] == m["judge/asked"] == m["judge/audits"]


def test_an_audit_that_finds_the_reward_model_wrong_widens_the_asking_again():
    judge = CountingJudge()
    rj = adaptive(judge, audit_share=0.2)
    for step in range(20):
        rj.label_rejections(a_step(step), step)
    _, quiet = rj.label_rejections(a_step(20), 20)
    assert quiet.asking["judge/unsure"] == 0
    # the reward model turns wrong on every answer (a new failure): the audits find it, its
    # bands lose their trust, and the step after asks at the cap again
    _, found = rj.label_rejections(a_step(21, rm_right=False), 21)
    assert found.asking["judge/audit_wrong"] == found.asking["judge/audit_calls"] > 0
    _, r = rj.label_rejections(a_step(22, rm_right=False), 22)
    assert r.asking["judge/unsure"] == 40 and r.asked == 10
    assert r.asking["judge/trusted_cells"] == 0


def test_a_band_the_reward_model_gets_wrong_keeps_being_asked():
    """A band where the judge keeps contradicting it is never trusted: its answers are asked
    every step, while a band it gets right falls to audits."""
    rj = adaptive(CountingJudge(), budget=0.5, audit_share=0.0)
    for step in range(30):
        rollouts = [comparison(step, i, right=True, score=0.95) for i in range(10)]
        # scored 0.35 (a "no"), and right: the reward model misses these
        rollouts += [comparison(step, 10 + i, right=True, score=0.35) for i in range(5)]
        _, r = rj.label_rejections(rollouts, step)
    assert r.asking["judge/unsure"] == 5 and r.asked == 5  # the 0.3 band, every step
    assert r.asking["judge/unsure_low"] == 0.3 and r.asking["judge/unsure_high"] == 0.4


def test_a_rejection_with_no_final_answer_is_the_rules_negative_never_a_judge_call():
    judge = CountingJudge()
    rj = adaptive(judge, budget=1.0)
    rollouts = [Rollout("a", "What is 50 + 5?", "55", "I think it is fifty-five but", False,
                        None, 0.9),
                comparison(0, 0, right=True, score=0.95)]
    pool, r = rj.label_rejections(rollouts, 0)
    assert [x.solution for x in judge.asked] == [rollouts[1].completion]
    assert [(x.completion, x.correct) for x in pool] == [
        (rollouts[0].completion, False), (rollouts[1].completion, True)]
    assert r.asking["judge/no_answer"] == 1
    # with asking by budget (today's default) such a rollout is still a candidate
    budget = RolloutJudge(CountingJudge(), budget=1.0, threshold=0.5)
    _, r = budget.label_rejections(rollouts, 0)
    assert r.asked == 2 and r.asking == {"judge/no_answer": 1.0}


def test_a_resumed_run_asks_what_the_uninterrupted_one_would(tmp_path):
    whole, first = adaptive(CountingJudge(), seed=7), adaptive(CountingJudge(), seed=7)
    for step in range(12):
        whole.label_rejections(a_step(step), step)
        if step < 6:
            first.label_rejections(a_step(step), step)
    saved = tmp_path / "judge.json"
    saved.write_text(json.dumps(first.state_dict()))
    resumed = adaptive(CountingJudge(), seed=7)
    resumed.load_state_dict(json.loads(saved.read_text()))
    for step in range(6, 12):
        resumed.label_rejections(a_step(step), step)
    assert resumed.asking.cells == whole.asking.cells
    later = [whole.label_rejections(a_step(12), 12)[1], resumed.label_rejections(a_step(12), 12)[1]]
    assert later[0].asked == later[1].asked and later[0].asking == later[1].asking
    # a checkpoint written with asking by budget has no asking state: a clear error
    budget = RolloutJudge(CountingJudge(), budget=0.25, threshold=0.5)
    with pytest.raises(UserError, match="judge.asking=budget"):
        adaptive(CountingJudge()).load_state_dict(budget.state_dict())
    for bad in ({"cells": [[1, 12, 1.0, 0.0]]}, {"cells": [[0, 3, 1.0, 2.0]]},
                {"cells": [[3, 3, 1.0, 0.0]]},
                {"cells": "many"}):
        with pytest.raises(UserError, match="asking state"):
            adaptive(CountingJudge()).load_state_dict({**budget.state_dict(), "asking": bad})


def test_audits_are_drawn_from_the_seed_and_the_step_at_the_share_asked():
    a, b = (AdaptiveAsking(tolerance=0.05, audit_share=0.1, memory_steps=50, threshold=0.5,
                           seed=3) for _ in range(2))
    for x in (a, b):
        x.cells[(2, 9)] = Counts(asked=100.0, wrong=0.0)  # trusted
    rollouts = [comparison(0, i, right=True, score=0.95) for i in range(2000)]
    plans = [x.plan(rollouts, range(2000), step=4) for x in (a, b)]
    assert plans[0].ask == plans[1].ask and 150 < plans[0].audits < 250
    assert a.plan(rollouts, range(2000), step=5).ask != plans[0].ask


def test_the_settings_of_adaptive_asking_are_checked():
    cfg = load_config(None, ["reward.mode=judged", "judge.backend=gold", "judge.asking=adaptive",
                             "rm_update.replay=0", "judge.tolerance=0.1"])
    cfg.check_reward(has_rm=True)
    built = rollout_judge(cfg.judge, asked=True, seed=1)
    assert built.asking is not None and built.asking.tolerance == 0.1
    with pytest.raises(ConfigError, match="needs rm_update.labels=judge"):
        load_config(None, ["reward.mode=rule", "reward.judge_rejected=true",
                           "judge.backend=gold", "judge.asking=adaptive"]).check_reward(
            has_rm=False)
    for bad, match in (("judge.asking=sometimes", "judge.asking"),
                       ("judge.tolerance=0.5", "judge.tolerance"),
                       ("judge.audit_share=2", "judge.audit_share"),
                       ("judge.memory_steps=0", "judge.memory_steps")):
        with pytest.raises(ConfigError, match=match):
            load_config(None, ["judge.backend=gold", bad]).judge.check()


# ------------------------------------------------------------------ the judge's verdicts pay

def test_with_judge_pays_a_verdict_pays_where_the_judge_spoke_and_the_reward_model_elsewhere():
    pytest.importorskip("torch")
    from functools import partial

    from cooper.experiment.testbed import tiny_arith_models
    from cooper.rl.step import CooperReward
    from cooper.rm.update import load_reward_model
    from cooper.verify.verifier import verify_batch

    rm_dir = tiny_arith_models() / "reward"
    texts = ["50 + 5 = 55. The answer is \\boxed{fifty-five}.",  # right, in words
             "50 + 5 = 54. The answer is \\boxed{fifty-four}.",  # wrong, in words
             "50 + 5 = 56. The answer is \\boxed{56}.",  # read, wrong: pays 0 (unread pay)
             "50 + 5 = 55. The answer is \\boxed{55}."]  # the rule's yes: pays 1

    def one_step(*extra: str):
        cfg = load_config(None, ["reward.mode=judged", f"reward.model={rm_dir}",
                                 "rm_update.replay=0", "judge.backend=gold", "judge.budget=0.25",
                                 "judge.threshold=0.0", "validation.judge=gold", *extra]).validate()
        rm, updater = load_reward_model(rm_dir, plan=cfg.plan(), update=cfg.rm_update)
        step = CooperReward.from_config(cfg, rm=rm, updater=updater, judge=CountingJudge(),
                                        verify=partial(verify_batch, mode="strict", timeout_s=10))
        rollouts, _, _ = step.score(["p"] * 4, ["What is 50 + 5?"] * 4, ["55"] * 4, texts, step=1)
        return step, rollouts, step.update()

    # a budget of one call (a quarter of 4): the highest-paid candidate is asked (and a "yes"
    # checked on its twin, one call more: reward.mode=judged checks every "yes")
    _, plain, st = one_step()
    assert st.judge.asked - st.judge.twins == 1 and not [r for r in plain if r.judged is not None]
    step, paid, st = one_step("reward.judge_pays=true")
    assert st.judge.asked - st.judge.twins == 1
    judged = [i for i, r in enumerate(paid) if r.judged is not None]
    assert len(judged) == 1 and judged[0] != 3  # the rule's yes is never asked
    i = judged[0]
    assert paid[i].paid == float(i == 0) != plain[i].paid  # its verdict pays, not the score
    for j in (0, 1, 2, 3):  # the others are paid as without it (the same reward model)
        if j != i:
            assert paid[j].paid == pytest.approx(plain[j].paid)
    # in evaluation no new call, but what the judge said before still pays
    again, _, _ = step.score(["p"] * 4, ["What is 50 + 5?"] * 4, ["55"] * 4, texts, step=2,
                             training=False)
    assert again[i].paid == float(i == 0) and len(step.judge.judge.asked) == st.judge.asked


def test_judge_pays_needs_the_judges_labels_in_cooper_s_update():
    for args, match in ((["reward.mode=hybrid", "reward.judge_pays=true"], "judge_pays"),
                        (["reward.mode=hybrid_cooper", "reward.judge_pays=true",
                          "judge.backend=gold"], "needs rm_update.labels=judge")):
        with pytest.raises(ConfigError, match=match):
            load_config(None, ["reward.model=m", *args]).validate()


def test_with_rm_verdicts_the_reward_models_verdict_pays_not_its_score():
    from cooper.config.reward_modes import reward_plan
    from cooper.rl.pay import pay

    rollouts = [Rollout("a", "What is 50 + 5?", "55", "\\boxed{55}", True, "55", 0.2),
                Rollout("a", "What is 50 + 5?", "55", "\\boxed{fifty-five}", False, "fifty-five", 0.7),
                Rollout("a", "What is 50 + 5?", "55", "\\boxed{fifty-four}", False, "fifty-four", 0.3),
                Rollout("a", "What is 50 + 5?", "55", "\\boxed{fifty}", False, "fifty", 0.5),
                Rollout("a", "What is 50 + 5?", "55", "\\boxed{54}", False, "54", 0.9),
                Rollout("a", "What is 50 + 5?", "55", "oops", False, None, float("nan"))]
    scores = pay(rollouts, reward_plan("judged", has_rm=True))
    verdicts = pay(rollouts, reward_plan("judged", has_rm=True, rm_verdicts=True))
    assert scores[:5] == [1.0, 0.7, 0.3, 0.5, 0.0]  # the rule's yes, the scores, the read "no"
    assert verdicts[:5] == [1.0, 1.0, 0.0, 1.0, 0.0]  # at 0.5 or more: right
    assert math.isnan(scores[5]) and math.isnan(verdicts[5])  # no finite score: unscorable
    with pytest.raises(ConfigError, match="reward.rm_verdicts"):
        reward_plan("cooper", has_rm=True, rm_verdicts=True)

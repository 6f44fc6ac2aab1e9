"""reward.hybrid_scores=audited: the hybrid's reward-model pay scaled by what the judge's audit
finds among the answers the reward model pays beyond the rule."""

from __future__ import annotations

import math

import pytest

from cooper.config import load_config
from cooper.config.engine import ConfigError
from cooper.config.train import reward_plan
from cooper.rl.judging import PRECISION_DECAY, RolloutJudge, judge_metrics, judged_pool
from cooper.rl.pay import pay
from test_judging import CountingJudge, roll

AUDITED = ["reward.mode=hybrid_cooper", "reward.model=m", "reward.hybrid_scores=audited",
           "rm_update.labels=judge", "judge.backend=gold", "judge.audit=0.5",
           "judge.audit_from=paid"]


def test_the_pay_beyond_the_rule_is_scaled_and_nothing_else():
    rollouts = [roll("a", "55", "55", rule=True, score=0.2),  # the rule's yes: 1
                roll("a", "54", "55", score=0.9),  # the rule read a different number: 0
                roll("a", "fifty-five", "55", score=0.8),  # unread: the score, scaled
                roll("a", "fifty-four", "55", score=math.nan)]  # unscorable: NaN
    audited = reward_plan("hybrid_cooper", has_rm=True, hybrid_scores="audited")
    unread = reward_plan("hybrid_cooper", has_rm=True, hybrid_scores="unread")
    got = pay(rollouts, audited, worth=0.25)
    assert got[:3] == [1.0, 0.0, pytest.approx(0.2)] and math.isnan(got[3])
    assert pay(rollouts, unread, worth=0.25)[:3] == [1.0, 0.0, 0.8]  # worth only where asked


def test_the_estimate_follows_the_audits_verdicts_and_forgets_old_ones():
    judge = RolloutJudge(CountingJudge(), audit=0.5, audit_from="paid")
    assert judge.paid_precision() == 0.5  # no draw yet: (0 + 1) / (0 + 2)
    judge.observe_audit([True, True, None])  # no verdict: not counted
    assert judge.paid_precision() == pytest.approx(3 / 4)
    for _ in range(60):  # an exploit: every draw wrong, step after step
        judge.observe_audit([False])
    assert judge.paid_precision() < 0.1
    assert judge.audit_right == pytest.approx(2 * PRECISION_DECAY ** 60)
    resumed = RolloutJudge(CountingJudge(), audit=0.5, audit_from="paid")
    resumed.load_state_dict(judge.state_dict())  # a resumed run pays what this one would
    assert resumed.paid_precision() == judge.paid_precision()
    for _ in range(60):  # the exploit gone: the draws right again
        judge.observe_audit([True])
    assert judge.paid_precision() > 0.9


def test_the_judged_pool_counts_the_draws_among_the_paid_only():
    # twenty paid answers in words, every one wrong; at a 10% budget 2 calls, one drawn
    rollouts = [roll("a", f"w{n}", "55", score=0.9 - n / 100) for n in range(20)]
    paid = RolloutJudge(CountingJudge(), audit=0.5, seed=1, audit_from="paid")
    _, r, _ = judged_pool(paid, rollouts, budget=0.1, threshold=0.5, step=1)
    assert (r.audited, r.audited_yes) == (1, 0)
    assert r.paid_precision == pytest.approx(1 / 3)  # (0 + 1) / (1 + 2)
    assert judge_metrics(r)["judge/paid_precision"] == pytest.approx(1 / 3)
    every = RolloutJudge(CountingJudge(), audit=0.5, seed=1)  # drawn among all: not an estimate
    _, r, _ = judged_pool(every, rollouts, budget=0.1, threshold=0.5, step=1)
    assert r.paid_precision is None and "judge/paid_precision" not in judge_metrics(r)
    assert every.paid_precision() == 0.5


def test_the_setting_is_checked():
    plan = load_config(None, AUDITED).validate().plan()
    assert plan.scaled_by_audit and plan.read_no_pays_zero
    for drop, message in [("judge.audit=0.5", "set judge.audit=S"),
                          ("judge.audit_from=paid", "judge.audit_from=paid")]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, [a for a in AUDITED if a != drop]).validate()
    with pytest.raises(ConfigError, match="use hybrid or hybrid_cooper"):
        load_config(None, [*AUDITED, "reward.mode=cooper"]).validate()


def test_a_cooper_step_pays_less_beyond_the_rule_once_the_audit_finds_wrong_answers():
    """A Cooper step on a tiny reward model: every answer in words is wrong and the audit draws
    among them; what the step pays them falls with the estimate, the rule's yes stays 1."""
    pytest.importorskip("torch")
    from functools import partial

    from cooper.experiment.testbed import tiny_arith_models
    from cooper.rl.step import CooperReward
    from cooper.rm.update import load_reward_model
    from cooper.verify.verifier import verify_batch

    rm_dir = tiny_arith_models() / "reward"
    cfg = load_config(None, [*AUDITED, f"reward.model={rm_dir}", "rm_update.negatives=rollouts",
                             "judge.budget=0.5", "judge.threshold=0.0",
                             "judge.audit=1.0"]).validate()
    rm, updater = load_reward_model(rm_dir, plan=cfg.plan(), update=cfg.rm_update)
    judge = RolloutJudge(CountingJudge(), audit=1.0, audit_from="paid")
    step = CooperReward.from_config(cfg, rm=rm, updater=updater, judge=judge,
                                    verify=partial(verify_batch, mode="strict", timeout_s=10))
    words = ["twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen"]
    worth = []
    for i, n in enumerate(range(50, 56)):
        texts = [f"\\boxed{{{n + 5}}}"] + [f"\\boxed{{{w}}}" for w in words]  # rule's yes + 6
        rollouts, _, _ = step.score([f"p{i}"] * 7, [f"What is {n} + 5?"] * 7, [str(n + 5)] * 7,
                                    texts, step=i + 1)
        paid = step.rewards(rollouts)
        worth.append(judge.paid_precision())
        assert paid[0] == 1.0
        assert paid[1:] == pytest.approx([r.rm_score * worth[-1] for r in rollouts[1:]])
        assert step.update().judge.paid_precision == worth[-1]
    assert worth == sorted(worth, reverse=True) and worth[-1] < 0.15
    # the drop-in refuses the pay without an audit among the paid, saying what to set
    with pytest.raises(ValueError, match="judge.audit_from=paid"):
        CooperReward.from_config(cfg, rm=rm, updater=updater,
                                 judge=RolloutJudge(CountingJudge(), audit=1.0),
                                 verify=partial(verify_batch, mode="strict", timeout_s=10))


def test_the_drop_in_pays_the_audited_way():
    from cooper.experiment.testbed import tiny_arith_models
    from cooper.rl import CooperRewardFunction

    prompts = [[{"role": "user", "content": "What is 50 + 5?"}]] * 4
    batch = [[{"role": "assistant", "content": c}] for c in
             ["\\boxed{55}", "\\boxed{fifty-four}", "\\boxed{fifty-three}", "\\boxed{52}"]]
    judge = load_config(None, ["judge.backend=gold", "judge.budget=0.5", "judge.threshold=0.0",
                               "judge.audit=1.0", "judge.audit_from=paid"]).judge
    audited = CooperRewardFunction(tiny_arith_models() / "reward", mode="hybrid_cooper",
                                   hybrid_scores="audited", negatives="rollouts", labels="judge",
                                   judge=judge)
    logged: dict[str, float] = {}
    paid = audited(prompts=prompts, completions=batch, reference=["55"] * 4,
                   log_metric=logged.__setitem__)
    # both answers in words drawn and wrong: (0 + 1) / (2 + 2)
    assert logged["judge/paid_precision"] == pytest.approx(0.25)
    assert paid[0] == 1.0 and paid[3] == 0.0  # the rule's yes and its read "no"
    unread = CooperRewardFunction(tiny_arith_models() / "reward", mode="hybrid_cooper",
                                  hybrid_scores="unread", negatives="rollouts", labels="judge",
                                  judge=judge)  # the same reward model, its pay not scaled
    unscaled = unread(prompts=prompts, completions=batch, reference=["55"] * 4)
    assert paid[1:3] == pytest.approx([0.25 * x for x in unscaled[1:3]])
    assert min(unscaled[1:3]) > 0.0
    with pytest.raises(ValueError, match="judge.audit_from=paid"):
        CooperRewardFunction(tiny_arith_models() / "reward", mode="hybrid_cooper",
                             hybrid_scores="audited", negatives="rollouts", labels="judge",
                             judge=load_config(None, ["judge.backend=gold"]).judge)

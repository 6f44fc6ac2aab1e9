"""A judge asked during RL (cooper.rl.judging): the gold judge and its seeded flips, each answer
asked once, the budget, a judge that fails or answers nonsense (no label, never a crash, never a
guess, over a real HTTP server), which rejections the update puts to it, and the two uses in a
step: TinyV's pay and Cooper's labels."""

from __future__ import annotations

import json
import math
import random
from functools import partial

import pytest

from cooper.config import load_config
from cooper.config.engine import ConfigError
from cooper.labelling.judge import GoldJudge, JudgeItem, JudgeVerdict, judge_from_config
from cooper.rl.judging import (
    RolloutJudge,
    answer_key,
    audit_order,
    drop_in_judge,
    judge_metrics,
    judged_pool,
    rollout_judge,
    stage2_candidates,
)
from cooper.types import Rollout
from openai_server import OpenAIServer, unused_port_url


def roll(pid: str, answer: str | None, ref: str, *, rule: bool = False,
         score: float | None = None, text: str | None = None) -> Rollout:
    completion = text if text is not None else (
        f"work. The answer is \\boxed{{{answer}}}." if answer is not None else "no idea")
    return Rollout(pid, f"question {pid}", ref, completion, rule, answer, score)


class CountingJudge:
    """The gold judge, counting what it is asked (a judge is a Protocol: any object will do)."""

    name, mode = "counting", "gold"

    def __init__(self, **kw):
        self.gold, self.asked = GoldJudge(**kw), []

    def judge(self, items, *, progress=False):
        self.asked += list(items)
        return self.gold.judge(items)

    def metrics(self):
        return {"asked": len(self.asked)}

    def close(self):
        pass


def judges_with(*settings: str) -> tuple[RolloutJudge, RolloutJudge]:
    """The judge a `cooper train` run asks and the TRL drop-in's, both from judged labels with
    the gold judge and ``settings``."""
    cfg = load_config(None, ["reward.mode=hybrid_cooper", "reward.model=m",
                             "rm_update.labels=judge", "judge.backend=gold", *settings]).validate()
    in_training = rollout_judge(cfg)
    in_drop_in, _, _ = drop_in_judge(cfg.judge, labels="judge", judge_rejected=False,
                                     mode="hybrid_cooper", updates=True, budget=0.1,
                                     threshold=0.5)
    assert in_training is not None and in_drop_in is not None
    return in_training, in_drop_in


# ------------------------------------------------------------------ the gold judge

def test_the_gold_judge_behind_the_judge_interface():
    items = [JudgeItem("Is 52 greater than 47?", "True", "52 > 47. The answer is \\boxed{yes}."),
             JudgeItem("What is 50 + 5?", "55", "so \\boxed{fifty-five}"),
             JudgeItem("What is 50 + 5?", "55", "so \\boxed{54}"),
             JudgeItem("What is 50 + 5?", "55", "I give up"),
             JudgeItem("?", "a fraction", "\\boxed{1}")]
    got = GoldJudge().judge(items)
    assert [v.verdict for v in got] == ["yes", "yes", "no", "no", "failed"]
    assert [v.correct for v in got] == [True, True, False, False, None]


def test_its_flips_are_seeded_per_item_and_at_the_rate_asked():
    items = [JudgeItem(f"What is {n} + 1?", str(n + 1), f"\\boxed{{{n + 1}}}") for n in range(2000)]
    noisy = GoldJudge(error_rate=0.1, seed=3)
    first = [v.correct for v in noisy.judge(items)]
    assert 0.08 < first.count(False) / len(first) < 0.12
    assert noisy.metrics() == {"judge_flipped": first.count(False)}
    # the same answer to the same problem is always judged the same way; another seed differs
    assert [v.correct for v in GoldJudge(error_rate=0.1, seed=3).judge(items)] == first
    # ... whatever else is asked with it, and in whatever order (a flip drawn from one stream
    # per call would move with the batch)
    again = GoldJudge(error_rate=0.1, seed=3)
    assert [v.correct for v in again.judge(items[::-1])] == first[::-1]
    assert [v.correct for v in again.judge(items[1::7])] == first[1::7]
    assert [v.correct for v in GoldJudge(error_rate=0.1, seed=4).judge(items)] != first
    assert all(v.correct for v in GoldJudge().judge(items))


def test_the_judges_settings_are_checked():
    ok = ["reward.mode=hybrid_cooper", "reward.model=m", "rm_update.labels=judge",
          "judge.backend=gold"]
    assert load_config(None, ok).validate().rm_update.labels == "judge"
    for extra, message in [
        (["judge.backend=none"], "judge.backend=none"),
        (["judge.error_rate=0.7"], r"\[0, 0.5\]"),
        (["judge.backend=endpoint", "judge.error_rate=0.1", "judge.base_url=http://x/v1",
          "judge.model=m"], "flips the gold judge"),
        (["judge.budget=0"], "judge.budget"),
        (["judge.audit=1.5"], "judge.audit"),
        (["judge.audit=0.5", "judge.audit_from=unpaid"], "not one of: all, paid"),
        (["judge.audit_from=paid"], "judge.audit is 0"),
        (["judge.audit=0.5", "judge.audit_grow=-1"], "0 or more"),
        (["judge.audit_grow=2"], "judge.audit is 0"),
        (["judge.order=random"], "not one of: paid, doubtful"),
        (["judge.backend=endpoint"], "judge.base_url"),
        (["judge.backend=local"], "judge.model"),
        (["judge.mode=choice"], "judge.backend=local"),
        (["reward.mode=rm"], "hybrid_cooper"),
        (["rm_update.labels=maybe"], "rm_update.labels"),
        (["rm_update.replay=4"], "replay_file"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, ok + extra).validate()
    with pytest.raises(ConfigError, match="judge.audit orders"):
        load_config(None, ["reward.mode=rule", "reward.judge_rejected=true",
                           "judge.backend=gold", "judge.audit=0.5"]).validate()
    with pytest.raises(ConfigError, match="judge.order=doubtful orders"):
        load_config(None, ["reward.mode=rule", "reward.judge_rejected=true",
                           "judge.backend=gold", "judge.order=doubtful"]).validate()
    with pytest.raises(ConfigError, match="reward.mode=rule"):
        load_config(None, ["reward.mode=cooper", "reward.model=m", "reward.judge_rejected=true",
                           "judge.backend=gold"]).validate()
    assert judge_from_config(load_config(None, []).judge) is None
    assert isinstance(judge_from_config(load_config(None, ok).judge), GoldJudge)


# ------------------------------------------------------------------ asking about rollouts

def test_each_answer_to_a_problem_is_asked_once_and_remembered():
    judge = CountingJudge()
    rj = RolloutJudge(judge)
    rollouts = [roll("a", "55", "55"), roll("a", "55", "55", text="other work, \\boxed{55}"),
                roll("a", "fifty-five", "55"), roll("b", "54", "55"), roll("a", None, "55")]
    labels, r = rj.label(rollouts)
    assert labels == [True, True, True, False, False]
    # "55" twice for problem a is one question (the same final answer, other working)
    assert (r.candidates, r.distinct, r.asked, r.cached) == (5, 4, 4, 0)
    assert (r.yes, r.no, r.failed, r.unlabelled) == (2, 2, 0, 0)
    again, r2 = rj.label(rollouts[:2] + [roll("b", "56", "55")])
    assert again == [True, True, False] and (r2.asked, r2.cached) == (1, 1)
    assert len(judge.asked) == 5 and rj.calls == 5
    assert answer_key(rollouts[0]) == answer_key(rollouts[1]) != answer_key(rollouts[3])


def test_the_limit_asks_the_first_new_answers_and_leaves_the_rest_unlabelled():
    judge = CountingJudge()
    rj = RolloutJudge(judge)
    rj.label([roll("p0", "0", "0")])  # known from an earlier step: free
    rollouts = [roll(f"p{i}", str(i), str(i)) for i in range(6)]
    labels, r = rj.label(rollouts, limit=2)
    assert labels == [True, True, True, None, None, None]
    assert (r.asked, r.cached, r.unlabelled) == (2, 1, 3)
    assert [it.question for it in judge.asked[1:]] == ["question p1", "question p2"]


class Raising:
    name, mode = "broken", "generate"

    def judge(self, items, *, progress=False):
        raise RuntimeError("CUDA out of memory")

    def metrics(self):
        raise RuntimeError("no counters either")

    def close(self):
        pass


class Short(Raising):
    def judge(self, items, *, progress=False):
        return [JudgeVerdict("yes")]


def test_a_judge_that_fails_gives_no_label_and_no_crash(caplog):
    rollouts = [roll("a", "55", "55"), roll("b", "54", "55")]
    for judge in (Raising(), Short()):
        rj = RolloutJudge(judge)
        labels, r = rj.label(rollouts)
        assert labels == [None, None] and (r.asked, r.failed, r.unlabelled) == (2, 2, 2)
        assert rj.verdicts == {}  # a failure is not remembered: a later step may ask again
        assert rj.metrics() == {}
    assert "CUDA out of memory" in caplog.text and "gave 1 verdicts for 2" in caplog.text


def test_an_llm_judge_over_http_that_answers_nonsense_fails_or_times_out():
    """A real server plays the judge: a parsable yes, a reply without a verdict, a server
    error past its retries, and a connection refused; only the first gives a label."""
    replies = iter(["Thinking... VERDICT: YES", "I cannot decide.", "VERDICT: NO", "VERDICT: NO"])
    with OpenAIServer(lambda req: next(replies)) as server:
        server.script("ok", "ok", "http_500", "http_500")
        cfg = load_config(None, ["judge.backend=endpoint", f"judge.base_url={server.url}",
                                 "judge.model=test-model", "judge.max_retries=1",
                                 "judge.concurrency=1", "judge.timeout_s=5"]).judge
        rj = RolloutJudge(judge_from_config(cfg))
        labels, r = rj.label([roll("a", "55", "55"), roll("b", "fifty", "50"),
                              roll("c", "7", "8")])
        assert labels == [True, None, None] and (r.yes, r.failed) == (1, 2)
        assert rj.metrics()["judge/judge_endpoint/requests"] >= 3
    cfg.base_url = unused_port_url()
    labels, r = RolloutJudge(judge_from_config(cfg)).label([roll("a", "55", "55")])
    assert labels == [None] and r.failed == 1


def test_its_memory_survives_a_checkpoint():
    rj = RolloutJudge(GoldJudge())
    rj.label([roll("a", "55", "55"), roll("b", "54", "55")])
    again = RolloutJudge(CountingJudge())
    again.load_state_dict(rj.state_dict())
    labels, r = again.label([roll("a", "55", "55"), roll("b", "54", "55")])
    assert labels == [True, False] and r.asked == 0 and again.calls == 2


# ------------------------------------------------------------------ what the update asks

def test_which_rejections_the_update_trusts_and_which_it_asks_about():
    rollouts = [
        roll("a", "55", "55", rule=True, score=0.9),  # accepted: a positive, neither
        roll("a", "54", "55", score=0.2),  # read as another number, paid little: trusted no
        roll("a", "54", "55", score=0.7),  # read, but the reward model pays it: disagreement
        roll("a", "fifty-five", "55", score=0.3),  # in words: the rule's no says nothing
        roll("b", "yes", "True", score=0.95),  # a truth value: the rule reads none
        roll("a", None, "55", score=float("nan")),  # no answer, no score: asked, last
    ]
    trusted, candidates = stage2_candidates(rollouts, threshold=0.5)
    assert trusted == [1]
    assert candidates == [4, 2, 3, 5]  # the highest-paid first
    # judge.order=doubtful: nearest the threshold first (0.7 and 0.3 tie at 0.2: sampling order)
    assert stage2_candidates(rollouts, 0.5, "doubtful") == ([1], [2, 3, 4, 5])
    assert stage2_candidates(rollouts, 0.8, "doubtful") == ([1, 2], [4, 3, 5])


def test_a_doubtful_order_spends_the_budget_where_the_reward_model_is_unsure():
    # six answers in words (all candidates): three paid with confidence, right and wrong
    rollouts = [roll("a", "fifty-five", "55", score=0.99), roll("b", "yes", "True", score=0.98),
                roll("a", "fifty-four", "55", score=0.95), roll("a", "fifty-six", "55", score=0.54),
                roll("b", "no", "True", score=0.45), roll("a", "fifty", "55", score=0.02)]

    def asked(order: str) -> list[str]:
        judge = CountingJudge()
        judged_pool(RolloutJudge(judge, order=order), rollouts, budget=0.5, threshold=0.5)
        return [item.solution for item in judge.asked]

    assert asked("paid") == [r.completion for r in rollouts[:3]]
    assert asked("doubtful") == [rollouts[i].completion for i in (3, 4, 2)]
    in_training, in_drop_in = judges_with("judge.order=doubtful")
    assert in_training.order == in_drop_in.order == "doubtful"


def test_the_judged_pool_labels_what_was_judged_and_leaves_out_the_rest():
    rollouts = [roll("a", "55", "55", rule=True, score=0.9), roll("a", "54", "55", score=0.1),
                roll("a", "fifty-five", "55", score=0.8), roll("a", "fifty-four", "55", score=0.6),
                roll("b", "yes", "True", score=0.4), roll("b", "no", "True", score=0.3)]
    rj = RolloutJudge(GoldJudge(error_rate=0.0))
    # 6 rollouts at a third: 2 new calls, the two highest-paid candidates
    pool, r, agreement = judged_pool(rj, rollouts, budget=1 / 3, threshold=0.5, gold=True)
    assert [(x.completion, x.correct) for x in pool] == [
        (rollouts[0].completion, True), (rollouts[1].completion, False),
        (rollouts[2].completion, True), (rollouts[3].completion, False)]
    assert (r.rollouts, r.candidates, r.asked, r.unlabelled) == (6, 4, 2, 2)
    assert agreement == 1.0
    noisy = RolloutJudge(GoldJudge(error_rate=0.5, seed=1))
    _, r, agreement = judged_pool(noisy, rollouts, budget=1.0, threshold=0.5, gold=True)
    assert r.asked == 4 and agreement is not None and agreement < 1.0


def test_an_audit_draws_part_of_the_calls_from_beyond_the_highest_paid():
    keys = [("p", str(i)) for i in range(10)] + [("p", "0")]  # highest-paid first; "0" twice
    # no audit: the order as given, nothing drawn
    order, drawn, asks = audit_order(keys, set(), 3, 0.0, random.Random(0))
    assert order == [0, 10, *range(1, 10)] and drawn == [] and asks == 3
    # a third of 3 calls: the two highest-paid new answers, then one drawn from the others;
    # an answer decided before is free and skipped
    seen: set[str] = set()
    for seed in range(200):
        order, drawn, asks = audit_order(keys, {("p", "1")}, 3, 0.33, random.Random(seed))
        assert [keys[j] for j in order[:3]] == [("p", "0"), ("p", "0"), ("p", "2")]
        assert asks == 3 and len(drawn) == 1 and drawn[0] not in {("p", "0"), ("p", "1"), ("p", "2")}
        assert keys[order[3]] == drawn[0] and sorted(order) == list(range(11))
        seen.add(drawn[0][1])
        assert audit_order(keys, {("p", "1")}, 3, 0.33, random.Random(seed))[1] == drawn
    assert seen == {str(i) for i in range(3, 10)}  # every answer beyond the top can be drawn
    # halves round up; all new answers within the limit: all asked, none drawn
    assert len(audit_order(keys, set(), 3, 0.5, random.Random(0))[1]) == 2
    assert audit_order(keys[:3], set(), 3, 1.0, random.Random(0)) == ([0, 1, 2], [], 3)
    # drawn only among the drawable (the answers the reward model pays), else the order as given
    paid = {("p", "0"), ("p", "1"), ("p", "5"), ("p", "6")}
    drawn_paid = {audit_order(keys, set(), 2, 0.5, random.Random(seed), paid)[1][0]
                  for seed in range(100)}
    assert drawn_paid == {("p", "1"), ("p", "5"), ("p", "6")}
    assert audit_order(keys, set(), 2, 0.5, random.Random(0), {("p", "0")}) == (
        [0, 10, *range(1, 10)], [], 2)
    # extra draws go beyond the limit, as many as there are drawable answers beyond the top
    order, drawn, asks = audit_order(keys, set(), 2, 0.5, random.Random(0), paid, extra=5)
    assert sorted(drawn) == [("p", "1"), ("p", "5"), ("p", "6")] and asks == 4
    assert [keys[j] for j in order[:asks]][:2] == [("p", "0"), ("p", "0")]
    order, drawn, asks = audit_order(keys, set(), 2, 0.5, random.Random(0), extra=2)
    assert len(drawn) == 3 and asks == 4 and keys[order[0]] == ("p", "0")
    assert audit_order(keys[:2], set(), 2, 0.5, random.Random(0), extra=2) == ([0, 1], [], 2)


def test_the_judged_pool_asks_the_audits_draw_and_counts_it():
    rollouts = [roll("a", str(n), "55", score=1 - n / 100) for n in range(50, 60)]
    judge = CountingJudge()
    # 10 disagreements (threshold 0) at 20%: 2 calls, the highest-paid ("50"), one drawn
    _, r, _ = judged_pool(RolloutJudge(judge, audit=0.5, seed=3), rollouts, budget=0.2,
                          threshold=0.0, step=7)
    asked = [item.solution for item in judge.asked]
    assert len(asked) == 2 and asked[0] == rollouts[0].completion
    assert (r.asked, r.audited, r.audited_yes) == (2, 1, asked[1] == rollouts[5].completion)
    # the draw is the seed's and the step's: the same again, another step another (in 10 tries)
    again = CountingJudge()
    judged_pool(RolloutJudge(again, audit=0.5, seed=3), rollouts, budget=0.2, threshold=0.0,
                step=7)
    assert [item.solution for item in again.asked] == asked
    others = set()
    for step in range(10):
        other = CountingJudge()
        judged_pool(RolloutJudge(other, audit=0.5, seed=3), rollouts, budget=0.2, threshold=0.0,
                    step=step)
        others.add(other.asked[1].solution)
    assert len(others) > 1
    # the setting reaches the judge of a `cooper train` run and of the drop-in
    cfg = load_config(None, ["reward.mode=hybrid_cooper", "reward.model=m",
                             "rm_update.labels=judge", "judge.backend=gold", "judge.audit=0.33",
                             "seed=5"]).validate()
    assert (rollout_judge(cfg).audit, rollout_judge(cfg).seed) == (0.33, 5)
    asked_judge, _, _ = drop_in_judge(cfg.judge, labels="judge", judge_rejected=False,
                                      mode="hybrid_cooper", updates=True, budget=0.1,
                                      threshold=0.5, seed=5)
    assert asked_judge is not None and asked_judge.audit == 0.33


def test_an_audit_that_finds_wrong_answers_asks_more_the_next_step_up_to_its_cap():
    def step(s: int, answer_from: int) -> list[Rollout]:  # 20 disagreements, a new problem
        return [roll(f"s{s}", str(n), "55", score=1 - n / 100)
                for n in range(answer_from, answer_from + 20)]

    judge = CountingJudge()
    rj = RolloutJudge(judge, audit=0.5, seed=1, audit_grow=3)
    asked, extras = [], []
    for s in range(5):  # every answer wrong: each drawn one buys a draw, up to 3 more
        _, r, _ = judged_pool(rj, step(s, 60), budget=0.1, threshold=0.0, step=s)
        asked.append(r.asked)
        extras.append(r.extra)
        assert r.audited == r.asked - 1 and r.audited_yes == 0  # one call the highest-paid
    assert asked == [2, 3, 4, 5, 5] and extras == [0, 1, 2, 3, 3]
    assert judge_metrics(r)["judge/audit_extra"] == 3
    # a resumed run asks what this one would: the extra draws are in the judge's state
    resumed = RolloutJudge(CountingJudge(), audit=0.5, seed=1, audit_grow=3)
    resumed.load_state_dict(rj.state_dict())
    assert resumed.extra == rj.extra == 3
    # every drawn answer right (the reference, on 20 problems; the rule missed them): back to
    # the budget on the next step
    right = [roll(f"r{n}", "55", "55", score=0.9) for n in range(20)]
    _, r, _ = judged_pool(rj, right, budget=0.1, threshold=0.0, step=5)
    assert (r.asked, r.audited_yes) == (5, 4)
    _, r, _ = judged_pool(rj, step(6, 60), budget=0.1, threshold=0.0, step=6)
    assert (r.asked, r.extra) == (2, 0)
    # without audit_grow, never beyond the budget however wrong the draws
    flat = RolloutJudge(CountingJudge(), audit=0.5, seed=1)
    assert all(judged_pool(flat, step(s, 60), budget=0.1, threshold=0.0, step=s)[1].asked == 2
               for s in range(3))
    # the setting reaches the judge of a `cooper train` run and of the drop-in
    cfg = load_config(None, ["reward.mode=hybrid_cooper", "reward.model=m",
                             "rm_update.labels=judge", "judge.backend=gold", "judge.audit=0.5",
                             "judge.audit_grow=4"]).validate()
    assert rollout_judge(cfg).audit_grow == 4
    asked_judge, _, _ = drop_in_judge(cfg.judge, labels="judge", judge_rejected=False,
                                      mode="hybrid_cooper", updates=True, budget=0.1,
                                      threshold=0.5)
    assert asked_judge is not None and asked_judge.audit_grow == 4


def test_an_audit_from_the_paid_draws_only_answers_the_reward_model_pays():
    # ten answers the rule cannot read (all candidates), paid 0.50 down to 0.41; at threshold
    # 0.455 the reward model pays the first five
    rollouts = [roll("a", f"w{n}", "55", score=1 - n / 100) for n in range(50, 60)]

    def draws(audit_from: str) -> set[str]:
        out = set()
        for step in range(30):
            judge = CountingJudge()
            _, r, _ = judged_pool(RolloutJudge(judge, audit=0.5, seed=3, audit_from=audit_from),
                                  rollouts, budget=0.2, threshold=0.455, step=step)
            assert r.asked == 2 and r.audited == 1
            assert judge.asked[0].solution == rollouts[0].completion  # the highest-paid first
            out.add(judge.asked[1].solution)
        return out

    paid = {rollouts[i].completion for i in range(1, 5)}
    assert len(draws("paid")) > 1 and draws("paid") <= paid
    assert draws("all") - paid  # from every candidate, the unpaid ones are drawn too
    in_training, in_drop_in = judges_with("judge.audit=0.33", "judge.audit_from=paid")
    assert in_training.audit_from == in_drop_in.audit_from == "paid"


# ------------------------------------------------------------------ in a step

def step_with(args: list[str], judge):
    from cooper.rl.step import CooperReward
    from cooper.verify.verifier import verify_batch

    cfg = load_config(None, args)
    return CooperReward.from_config(cfg, rm=None, updater=None, judge=judge,
                                    verify=partial(verify_batch, mode="strict", timeout_s=10))


def test_tinyv_pays_what_the_judge_accepts_among_the_rules_rejections():
    judge = RolloutJudge(CountingJudge())
    step = step_with(["reward.mode=rule", "reward.judge_rejected=true", "judge.backend=gold",
                      "validation.judge=gold", "rm_update.pair_metrics=false"], judge)
    texts = ["\\boxed{55}", "\\boxed{fifty-five}", "\\boxed{54}", "\\boxed{fifty-five}"]
    rollouts, stats, seconds = step.score(["p"] * 4, ["What is 50 + 5?"] * 4, ["55"] * 4, texts,
                                          step=1)
    assert [r.correct for r in rollouts] == [True, False, False, False]  # the rule's, as logged
    assert step.rewards(rollouts) == [1.0, 1.0, 0.0, 1.0]
    assert stats.judge.asked == 2 and stats.judge.candidates == 3  # fifty-five once
    assert stats.rule_mean == 0.25 and stats.blind_spot.gold_gap == pytest.approx(0.0)
    assert "judge" in seconds
    from cooper.rl.step_metrics import rollout_metrics

    m = rollout_metrics(stats, seconds)
    assert m["judge/asked"] == 2 and m["judge/asked_share"] == 0.5


def test_judged_labels_reach_the_update_and_unjudged_ones_never_become_negatives():
    """A Cooper step on a tiny reward model, every rejection a disagreement (threshold 0): with
    budget for all, the right answer in words is judged right and paired with the judged-wrong
    ones; with budget for one, the rest get no label, so no rollout is taught as wrong by the
    rule's "no" and no pair can form."""
    from cooper.rl.step import CooperReward
    from cooper.rl.step_metrics import stage2_metrics
    from cooper.rm.update import load_reward_model
    from cooper.verify.verifier import verify_batch

    pytest.importorskip("torch")
    from cooper.experiment.testbed import tiny_arith_models

    rm_dir = tiny_arith_models() / "reward"
    texts = ["50 + 5 = 55. The answer is \\boxed{fifty-five}.",
             "50 + 5 = 54. The answer is \\boxed{fifty-four}.",
             "50 + 5 = 56. The answer is \\boxed{56}.",
             "50 + 5 = 57. The answer is \\boxed{57}."]

    def one_step(budget: float):
        cfg = load_config(None, ["reward.mode=hybrid_cooper", f"reward.model={rm_dir}",
                                 "rm_update.negatives=rollouts", "rm_update.labels=judge",
                                 "judge.backend=gold", f"judge.budget={budget}",
                                 "judge.threshold=0.0", "validation.judge=gold"]).validate()
        rm, updater = load_reward_model(rm_dir, plan=cfg.plan(), update=cfg.rm_update)
        step = CooperReward.from_config(cfg, rm=rm, updater=updater,
                                        judge=RolloutJudge(CountingJudge()),
                                        verify=partial(verify_batch, mode="strict", timeout_s=10))
        step.score(["p"] * 4, ["What is 50 + 5?"] * 4, ["55"] * 4, texts, step=1)
        return step, step.update()

    step, st = one_step(1.0)
    assert (st.judge.asked, st.judge.unlabelled, st.judge.yes) == (4, 0, 1)
    assert st.positives == 1  # the answer in words, judged right
    assert st.pairs == 2 and st.updated and math.isfinite(st.loss)  # 2 negatives per positive
    assert st.judge_gold_agreement == 1.0
    assert stage2_metrics(st)["judge/asked"] == 4
    assert step.source_metrics()["judge/calls_total"] == 4.0
    _, st = one_step(0.25)
    assert (st.judge.asked, st.judge.unlabelled) == (1, 3)
    assert st.pairs == 0 and not st.updated


# ------------------------------------------------------------------ whole runs (smoke)

@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def compare_args(arith, out, *extra: str) -> list[str]:
    from test_train_smoke import tiny_args

    return [*tiny_args(arith, out, "hybrid_cooper", "data.dataset=arith_2x1_compare",
                       "validation.dataset=arith_2x1_compare", "validation.split=validation",
                       "validation.judge=gold", "rm_update.negatives=rollouts",
                       "rollout.prompts_per_step=4", "judge.backend=gold"), *extra]


@pytest.mark.smoke
def test_cooper_train_with_judged_labels_and_replay_resumes_with_the_judges_memory(arith,
                                                                                   tmp_path):
    import random

    from conftest import run_cli
    from cooper.data.synthetic import compare_triples
    from test_train_smoke import metrics

    rows = tmp_path / "rm_rows.jsonl"
    rows.write_text("".join(json.dumps(t.to_json()) + "\n"
                            for t in compare_triples("train", 40, random.Random(0))))
    out = tmp_path / "judged"
    args = compare_args(arith, out, "rm_update.labels=judge", "judge.budget=0.25",
                        "judge.error_rate=0.1", "rm_update.replay=2",
                        f"rm_update.replay_file={rows}", "rm_update.replay_judged=2",
                        "save_steps=1")
    run_cli(*args)
    steps = [r for r in metrics(out) if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        assert r["judge/asked"] <= 0.25 * 16 and r["judge/candidates"] >= r["judge/asked"]
        assert r["rm/pairs_replay"] == 2 and r["rm/pairs"] >= 2 and r["rm/updated"] == 1.0
        assert "gold/rm_fpr_unread" in r or "gold/accuracy_yesno" in r
    memory = json.loads((out / "checkpoint-2" / "judge.json").read_text())
    assert memory["calls"] == sum(r["judge/asked"] for r in steps) > 0
    # the tiny policy is never right, so no pair forms and none is kept for replay_judged:
    # nothing replayed, no file (test_replay_judged.py replays real judged pairs)
    assert all(r["rm/pairs_rollout"] == 0 and "rm/pairs_replay_judged" not in r for r in steps)
    assert not (out / "checkpoint-2" / "replay_judged.json").exists()
    run_cli(*args, "max_steps=3", "--resume")
    resumed = [r for r in metrics(out) if "loss" in r]
    assert [r["step"] for r in resumed] == [1, 2, 3]
    after = json.loads((out / "checkpoint-3" / "judge.json").read_text())
    assert after["calls"] == memory["calls"] + resumed[-1]["judge/asked"]
    assert {tuple(v[:2]) for v in memory["verdicts"]} <= {tuple(v[:2]) for v in after["verdicts"]}


@pytest.mark.smoke
def test_cooper_train_pays_the_judges_yes_on_the_rules_rejections(tmp_path):
    """The testbed's policy answers comparisons, which the rule never pays and the gold judge
    does: the policy is paid the gold accuracy, far above the rule's."""
    from conftest import run_cli
    from cooper.experiment.testbed import TINY_ARITH_COMPARE, tiny_arith_models
    from test_train_smoke import metrics

    compare = tiny_arith_models(name=TINY_ARITH_COMPARE)
    out = tmp_path / "tinyv"
    args = [a.replace("reward.mode=hybrid_cooper", "reward.mode=rule")
            for a in compare_args(compare, out, "reward.judge_rejected=true",
                                  "rollout.max_completion_length=64")]
    run_cli(*args)
    steps = [r for r in metrics(out) if "loss" in r]
    for r in steps:
        assert r["judge/candidates"] == round(16 * (1 - r["reward/rule_mean"]))
        # paid: the rule's yes and the judge's (gold, so exactly the gold accuracy)
        assert r["reward"] == pytest.approx(r["gold/accuracy"])
        assert r["hacking/gold_gap"] == pytest.approx(0.0)
    assert sum(r["gold/accuracy"] - r["reward/rule_mean"] for r in steps) > 0.2


def test_the_drop_in_takes_a_judge(arith):
    from cooper.rl import CooperRewardFunction

    prompts = [[{"role": "user", "content": "What is 50 + 5?"}]] * 4
    batch = [[{"role": "assistant", "content": c}] for c in
             ["\\boxed{55}", "\\boxed{fifty-five}", "\\boxed{54}", "\\boxed{fifty-four}"]]
    logged: dict = {}
    kwargs = dict(reference=["55"] * 4, log_metric=lambda k, v: logged.setdefault(k, v))
    tinyv = CooperRewardFunction(None, mode="rule", judge=GoldJudge(), judge_rejected=True)
    assert tinyv(prompts=prompts, completions=batch, **kwargs) == [1.0, 1.0, 0.0, 0.0]
    assert logged["judge/asked"] == 3
    logged.clear()
    judged = CooperRewardFunction(arith / "reward", mode="hybrid_cooper", negatives="rollouts",
                                  labels="judge", replay_judged=4, judge=load_config(None, [
                                      "judge.backend=gold", "judge.budget=1.0",
                                      "judge.threshold=0.0"]).judge)
    judged(prompts=prompts, completions=batch, **kwargs)
    # one positive a prompt (the paper's), paired with the two answers the judge called wrong
    assert logged["judge/asked"] == 3 and logged["rm/positives"] == 1 and logged["rm/pairs"] == 2
    assert len(judged.cooper.replay.judged) == 2  # kept, for the next calls' updates
    with pytest.raises(ConfigError, match="replay_judged .* needs rm_update.labels=judge"):
        CooperRewardFunction(arith / "reward", mode="cooper", replay_judged=4)
    with pytest.raises(ConfigError, match="ask.s. a judge"):
        CooperRewardFunction(arith / "reward", mode="cooper", labels="judge")
    with pytest.raises(ConfigError, match="mode='rule'"):
        CooperRewardFunction(arith / "reward", mode="cooper", judge=GoldJudge(),
                             judge_rejected=True)


def test_hybrid_pay_can_leave_the_rules_read_no_at_zero(arith):
    """reward.hybrid_scores=unread: a rejection where the rule read two different numbers is
    paid 0, as the rule pays it; the reward model's score pays only where the rule could not
    read the answer (its "no" says nothing)."""
    from cooper.rl import CooperRewardFunction

    prompts = [[{"role": "user", "content": "What is 50 + 5?"}]] * 4
    batch = [[{"role": "assistant", "content": c}] for c in
             ["\\boxed{55}", "\\boxed{54}", "\\boxed{fifty-five}", "no idea"]]

    def pay(scores: str) -> tuple[list[float], dict[str, float]]:
        paid = CooperRewardFunction(arith / "reward", mode="hybrid", hybrid_scores=scores,
                                    negatives="rollouts")
        logged: dict[str, float] = {}
        rewards = paid(prompts=prompts, completions=batch, reference=["55"] * 4,
                       log_metric=logged.__setitem__)
        return rewards, logged

    (every, every_log), (unread, unread_log) = pay("rejected"), pay("unread")
    assert every[0] == unread[0] == 1.0  # the rule's yes
    assert every[1] > 0.0 and unread[1] == 0.0  # 54: read, a different number
    assert unread[2:] == every[2:] and all(x > 0.0 for x in every[2:])  # unread: the score
    # the logged reward is what was paid, the 0 included (the paid-reward curve of a report)
    assert unread_log["reward/hybrid_mean"] == pytest.approx(sum(unread) / 4)
    assert every_log["reward/hybrid_mean"] == pytest.approx(sum(every) / 4)
    cfg = ["reward.mode=hybrid_cooper", "reward.model=m", "reward.hybrid_scores=unread"]
    assert load_config(None, cfg).validate().plan().read_no_pays_zero
    for extra, message in [(["reward.hybrid_scores=some"], "reward.hybrid_scores"),
                           (["reward.mode=cooper"], "use hybrid or hybrid_cooper")]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, cfg + extra).validate()
    with pytest.raises(ConfigError, match="hybrid_scores=unread"):
        CooperRewardFunction(arith / "reward", mode="cooper", hybrid_scores="unread")

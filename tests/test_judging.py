"""A judge asked during RL (cooper.rl.judging): the gold judge and its seeded flips, each answer
asked once, the budget, a judge that fails or answers nonsense (no label, never a crash, never a
guess, over a real HTTP server), which rejections the update puts to it, and the two uses in a
step: TinyV's pay and Cooper's labels."""

from __future__ import annotations

import json
import math
from functools import partial

import pytest

from cooper.config import load_config
from cooper.config.engine import ConfigError
from cooper.config.reward_sections import JudgeConfig
from cooper.labelling.backends import drop_in_judge
from cooper.labelling.gold_judge import GoldJudge
from cooper.labelling.judge import JudgeItem, JudgeVerdict
from cooper.labelling.judge_config import judge_from_config
from cooper.rl.judging import (
    JudgeUnavailable,
    RolloutJudge,
    answer_key,
    judge_metrics,
    stage2_candidates,
)
from cooper.rl.observer import GoldObserver
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
        (["judge.fail_steps=-1"], "judge.fail_steps"),
        (["judge.backend=endpoint"], "judge.base_url"),
        (["judge.backend=local"], "judge.model"),
        (["judge.mode=choice"], "judge.backend=local"),
        (["reward.mode=rm"], "hybrid_cooper"),
        (["rm_update.labels=maybe"], "rm_update.labels"),
        (["rm_update.replay=4"], "replay_file"),
        (["rm_update.replay_forms=2"], "was removed"),
        (["rm_update.rollout_forms=-1"], "rollout_forms must be >= 0"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, ok + extra).validate()
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
    # an edited or foreign file: a clear error naming what it should hold, nothing half-loaded
    from cooper.errors import UserError

    for bad in ([1, 2], {"verdicts": [["a", "55"]]}, {"verdicts": [["a", "55", "yes"]]},
                {"calls": "many"}, "judge"):
        with pytest.raises(UserError, match="should hold calls, failed_steps and verdicts"):
            again.load_state_dict(bad)
    assert again.calls == 2 and len(again.verdicts) == 2


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


def test_the_judged_pool_labels_what_was_judged_and_leaves_out_the_rest():
    rollouts = [roll("a", "55", "55", rule=True, score=0.9), roll("a", "54", "55", score=0.1),
                roll("a", "fifty-five", "55", score=0.8), roll("a", "fifty-four", "55", score=0.6),
                roll("b", "yes", "True", score=0.4), roll("b", "no", "True", score=0.3)]
    rj = RolloutJudge(GoldJudge(error_rate=0.0), budget=1 / 3, threshold=0.5)
    # 6 rollouts at a third: 2 new calls, the two highest-paid candidates
    pool, r = rj.label_rejections(rollouts)
    assert [(x.completion, x.correct) for x in pool] == [
        (rollouts[0].completion, True), (rollouts[1].completion, False),
        (rollouts[2].completion, True), (rollouts[3].completion, False)]
    assert [x.judged for x in pool] == [None, None, True, False]  # the judge's labels marked
    assert (r.rollouts, r.candidates, r.asked, r.unlabelled) == (6, 4, 2, 2)
    # the testbeds' gold judge, watching from outside the step, agrees with every label
    assert GoldObserver.judge_agreement(pool) == 1.0
    assert GoldObserver.judge_agreement(rollouts) is None  # nothing the judge labelled
    noisy = RolloutJudge(GoldJudge(error_rate=0.5, seed=1), budget=1.0, threshold=0.5)
    pool, r = noisy.label_rejections(rollouts)
    agreement = GoldObserver.judge_agreement(pool)
    assert r.asked == 4 and agreement is not None and agreement < 1.0


# ------------------------------------------------------------------ in a step

def step_with(args: list[str], judge):
    from cooper.rl.step import CooperReward
    from cooper.verify.verifier import verify_batch

    cfg = load_config(None, args)
    return CooperReward.from_config(cfg, rm=None, updater=None, judge=judge,
                                    verify=partial(verify_batch, mode="strict", timeout_s=10))


def test_tinyv_pays_what_the_judge_accepts_among_the_rules_rejections():
    judge = CountingJudge()
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
    # the policy's evaluation asks no new answer: known verdicts pay, new ones are the rule's
    texts = ["\\boxed{fifty-five}", "\\boxed{fifty-six}"]
    rollouts, stats, _ = step.score(["p"] * 2, ["What is 50 + 5?"] * 2, ["55"] * 2, texts,
                                    step=1, training=False)
    assert step.rewards(rollouts) == [1.0, 0.0] and stats.judge.asked == 0
    assert len(judge.asked) == 2


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
                                        judge=CountingJudge(),
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
                        "judge.error_rate=0.1", "rm_update.replay=2", "rm_update.rollout_forms=3",
                        f"rm_update.replay_file={rows}", "save_steps=1")
    run_cli(*args)
    steps = [r for r in metrics(out) if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for r in steps:
        assert r["judge/asked"] <= 0.25 * 16 and r["judge/candidates"] >= r["judge/asked"]
        # the forms are cut from the step's right rollouts: up to 3, some where it has one
        forms = r.get("rm/pairs_forms", 0)
        assert r["rm/pairs_replay"] == 2 and forms <= 3 and (forms > 0) == (r["rm/positives"] > 0)
        assert r["rm/pairs"] >= 2 and r["rm/updated"] == 1.0
        assert "gold/rm_fpr_unread" in r or "gold/accuracy_yesno" in r
    memory = json.loads((out / "checkpoint-2" / "judge.json").read_text())
    assert memory["calls"] == sum(r["judge/asked"] for r in steps) > 0
    # a judged run resumes only with its judge's verdicts
    saved = (out / "checkpoint-2" / "judge.json").read_text()
    (out / "checkpoint-2" / "judge.json").unlink()
    failed = run_cli(*args, "max_steps=3", "--resume", check=False)
    assert failed.returncode != 0 and "holds no judge.json" in failed.stderr
    (out / "checkpoint-2" / "judge.json").write_text(saved)
    run_cli(*args, "max_steps=3", "--resume")
    resumed = [r for r in metrics(out) if "loss" in r]
    assert [r["step"] for r in resumed] == [1, 2, 3]
    after = json.loads((out / "checkpoint-3" / "judge.json").read_text())
    assert after["calls"] == memory["calls"] + resumed[-1]["judge/asked"]
    assert {tuple(v[:2]) for v in memory["verdicts"]} <= {tuple(v[:2]) for v in after["verdicts"]}


@pytest.mark.smoke
def test_cooper_train_pays_the_judges_yes_on_the_rules_rejections(tmp_path):
    """The testbed's policy answers comparisons, which the rule never pays and the gold judge
    does: the policy is paid the gold accuracy, far above the rule's. Each yes is checked on
    its wrong twin (judge.counterfactual), which the gold judge, reading the answer, confirms:
    the same pay, one more call per yes."""
    from conftest import run_cli
    from cooper.experiment.testbed import TINY_ARITH_COMPARE, tiny_arith_models
    from test_train_smoke import metrics

    compare = tiny_arith_models(name=TINY_ARITH_COMPARE)
    out = tmp_path / "tinyv"
    args = [a.replace("reward.mode=hybrid_cooper", "reward.mode=rule")
            for a in compare_args(compare, out, "reward.judge_rejected=true",
                                  "judge.counterfactual=true",
                                  "rollout.max_completion_length=64")]
    run_cli(*args)
    steps = [r for r in metrics(out) if "loss" in r]
    for r in steps:
        assert r["judge/candidates"] == round(16 * (1 - r["reward/rule_mean"]))
        # paid: the rule's yes and the judge's (gold, so exactly the gold accuracy)
        assert r["reward"] == pytest.approx(r["gold/accuracy"])
        assert r["hacking/gold_gap"] == pytest.approx(0.0)
        assert r["judge/twins"] == r["judge/yes"] and r["judge/doubted"] == 0
    assert sum(r["gold/accuracy"] - r["reward/rule_mean"] for r in steps) > 0.2
    assert sum(r["judge/twins"] for r in steps) > 0


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
                                  labels="judge", judge=load_config(None, [
                                      "judge.backend=gold", "judge.budget=1.0",
                                      "judge.threshold=0.0"]).judge)
    judged(prompts=prompts, completions=batch, **kwargs)
    # one positive a prompt (the paper's), paired with the two answers the judge called wrong
    assert logged["judge/asked"] == 3 and logged["rm/positives"] == 1 and logged["rm/pairs"] == 2
    # a spec as the CLI takes it, and a JudgeConfig's budget not contradicted silently
    spec = CooperRewardFunction(arith / "reward", mode="judged", judge="gold", replay=0,
                                judge_budget=0.5)
    assert (spec.cooper.judge.budget, spec.cooper.replay.rows_per_step) == (0.5, 0)
    with pytest.raises(ConfigError, match="contradicts the JudgeConfig"):
        CooperRewardFunction(arith / "reward", mode="judged", replay=0,
                             judge=JudgeConfig(backend="gold", budget=0.2), judge_budget=0.5)
    with pytest.raises(ConfigError, match="replay_file"):
        CooperRewardFunction(arith / "reward", mode="judged", judge="gold")
    with pytest.raises(ConfigError, match="judge.backend=none"):
        CooperRewardFunction(arith / "reward", mode="cooper", labels="judge")
    with pytest.raises(ConfigError, match="reward.mode=rule"):
        CooperRewardFunction(arith / "reward", mode="cooper", judge=GoldJudge(),
                             judge_rejected=True)


def test_the_drop_in_reads_judge_specs_as_the_cli_does():
    assert drop_in_judge("gold")[0].backend == "gold"
    cfg, obj = drop_in_judge("api:Qwen/Qwen3-4B@http://127.0.0.1:8001/v1#MY_KEY", budget=0.2)
    assert (cfg.backend, cfg.model, cfg.base_url, cfg.api_key_env, cfg.budget, obj) == (
        "endpoint", "Qwen/Qwen3-4B", "http://127.0.0.1:8001/v1", "MY_KEY", 0.2, None)
    cfg, _ = drop_in_judge("hf:smollm2-135m-instruct", threshold=0.7)
    assert (cfg.backend, cfg.model, cfg.threshold) == ("local", "smollm2-135m-instruct", 0.7)
    judge = GoldJudge()
    assert drop_in_judge(judge) == (JudgeConfig(), judge)
    from cooper.errors import UserError

    with pytest.raises(UserError, match="api:MODEL@URL"):
        drop_in_judge("api:no-url")
    with pytest.raises(UserError, match="empty model spec"):
        drop_in_judge("  ")
    with pytest.raises(ConfigError, match="is not a judge"):
        drop_in_judge(0.5)


def test_cooper_train_and_the_drop_in_build_their_engine_with_one_builder(arith, tmp_path):
    """The drop-in turns its keywords into `cooper train`'s settings and calls the same builder
    (CooperReward.from_config): from the same settings the two engines are the same."""
    import random

    from cooper.data.synthetic import compare_triples
    from cooper.rl import CooperRewardFunction
    from cooper.rl.step import CooperReward
    from cooper.rm.update import load_reward_model

    rows = tmp_path / "rm_rows.jsonl"
    rows.write_text("".join(json.dumps(t.to_json()) + "\n"
                            for t in compare_triples("train", 20, random.Random(0))))
    cfg = load_config(None, ["reward.mode=judged", f"reward.model={arith / 'reward'}",
                             "judge.backend=gold", "judge.budget=0.25", "judge.fail_steps=5",
                             f"rm_update.replay_file={rows}", "rm_update.replay=4",
                             "seed=3"]).validate()
    rm, updater = load_reward_model(arith / "reward", plan=cfg.plan(), update=cfg.rm_update)
    cli = CooperReward.from_config(cfg, rm=rm, updater=updater)
    drop_in = CooperRewardFunction(
        arith / "reward", mode="judged", replay_file=str(rows), replay=4, seed=3,
        judge=JudgeConfig(backend="gold", budget=0.25, fail_steps=5)).cooper

    def what(e: CooperReward) -> tuple:
        j = e.judge
        return (e.plan, e.judge_labels, e.judge_rejected, e.from_rollouts, e.negatives,
                e.negatives_per_positive, e.positives_per_prompt, e.seed, e.monitor_every,
                (j.budget, j.threshold, j.fail_steps), e.replay.rows_per_step, e.replay.rows,
                e.background)

    assert what(cli) == what(drop_in)
    assert cli.plan.read_no_pays_zero and cli.judge_labels and cli.replay.rows_per_step == 4


def test_a_judge_that_never_answers_stops_the_run_naming_itself_and_its_failure():
    rollouts = [roll("a", "fifty", "55"), roll("b", "yes", "True")]
    rj = RolloutJudge(Raising(), fail_steps=2, name="endpoint judge-x at http://127.0.0.1:9/v1")
    rj.label(rollouts)
    rj.label([])  # a step that asks nothing neither counts nor resets
    with pytest.raises(JudgeUnavailable, match=r"judge-x at http://127.0.0.1:9/v1.*2 steps in a "
                                               r"row.*CUDA out of memory.*judge.fail_steps=0"):
        rj.label(rollouts)
    # one answer resets the count; fail_steps=0 never stops
    rj = RolloutJudge(Raising(), fail_steps=2)
    rj.label(rollouts)
    rj.judge = GoldJudge()
    rj.label([roll("c", "55", "55")])
    rj.judge = Raising()
    labels, r = rj.label([roll("d", "5", "6")])
    assert labels == [None] and r.failed_steps == 1
    patient = RolloutJudge(Raising(), fail_steps=0)
    for _ in range(5):
        patient.label([roll("e", "5", "6")])
    assert patient.failed_steps == 5 and judge_metrics(r)["judge/failed_steps"] == 1


def test_reward_mode_judged_is_the_recommended_twelve_setting_command():
    """The one switch gives exactly the settings of the arm it replaces, and each of them can
    still be set apart (rm_update.replay=0 where the rows are not at hand)."""
    common = ["reward.model=m", "judge.backend=gold", "rm_update.replay_file=rows.jsonl"]
    switch = load_config(None, ["reward.mode=judged", *common]).validate()
    spelled = load_config(None, [
        "reward.mode=hybrid_cooper", "reward.hybrid_scores=unread", "rm_update.negatives=rollouts",
        "rm_update.negatives_per_positive=2", "rm_update.labels=judge", "rm_update.replay=16",
        "rm_update.anchor_weight=0.5", "judge.budget=0.1", "rm_update.rollout_forms=16",
        "judge.counterfactual=true", *common]).validate()
    a, b = switch.to_dict(), spelled.to_dict()
    assert a.pop("reward") | {"mode": "x"} == b.pop("reward") | {"mode": "x"}
    assert a == b and switch.plan() == spelled.plan()
    plain = load_config(None, ["reward.mode=judged", "rm_update.replay=0", "reward.model=m",
                               "judge.backend=gold"]).validate()
    assert (plain.rm_update.replay, plain.rm_update.anchor_weight) == (0, 0.5)
    with pytest.raises(ConfigError, match="reward.mode=judged ask.s. a judge, but judge.backend=none"):
        load_config(None, ["reward.mode=judged", "rm_update.replay=0", "reward.model=m"]).validate()
    with pytest.raises(ConfigError, match="rm_update.replay=0 where those rows"):
        load_config(None, ["reward.mode=judged", "reward.model=m", "judge.backend=gold"]).validate()
    # the other modes keep the paper's defaults
    cooper = load_config(None, ["reward.mode=cooper", "reward.model=m"]).validate()
    assert (cooper.rm_update.negatives, cooper.rm_update.labels, cooper.rm_update.replay,
            cooper.rm_update.anchor_weight, cooper.reward.hybrid_scores) == (
        "assistant", "rule", 0, 0.0, "rejected")


@pytest.mark.parametrize("key, old, other", [
    ("judge.order", "paid", "doubtful"), ("judge.audit", "0.0", "0.33"),
    ("judge.audit_from", "all", "paid"), ("judge.audit_grow", "0", "4"),
    ("rm_update.replay_judged", "0", "2"), ("rm_update.negatives_readable", "false", "true")])
def test_a_removed_setting_loads_at_its_old_default_and_names_its_last_commit_otherwise(
        key, old, other):
    assert load_config(None, [f"{key}={old}"]) == load_config(None, [])
    with pytest.raises(ConfigError, match=f"'{key}' was removed .*commit e3ee47e"):
        load_config(None, [f"{key}={other}"])
    with pytest.raises(ConfigError, match="hybrid_scores=audited was removed .*e3ee47e"):
        load_config(None, ["reward.mode=hybrid_cooper", "reward.hybrid_scores=audited",
                           "reward.model=m"]).validate()


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


def test_cooper_train_settings_lists_the_experimental_ones_apart():
    from conftest import run_cli

    out = run_cli("train", "--settings").stdout
    main, _, apart = out.partition("# experimental")
    keys = [line.split(" = ")[0] for line in main.splitlines() if " = " in line]
    judged = [k for k in keys if k.split(".")[0] in ("reward", "rm_update", "judge")]
    # 35 after the variants that lost were removed, 37 with the defence of reward.mode=judged
    # (judge.counterfactual, rm_update.rollout_forms) among them; adaptive asking and the
    # verdicts as pay are apart until they are the recommended path
    assert 30 <= len(judged) <= 37 and "reward.mode" in judged and "judge.fail_steps" in judged
    assert "judge.counterfactual" in judged and "rm_update.rollout_forms" in judged
    for key in ("judge.asking", "judge.tolerance", "judge.audit_share", "judge.memory_steps",
                "reward.judge_pays", "reward.rm_verdicts"):
        assert key not in keys and f"{key} = " in apart
    assert "judge.error_rate = 0.0" in apart and "judge.error_rate" not in keys
    assert "judge.audit =" not in out and "replay_judged" not in out and "replay_forms" not in out


def test_a_judged_checkpoint_without_or_with_a_broken_judge_json_is_a_clear_error(tmp_path):
    from cooper.errors import UserError
    from cooper.rl.checkpoints import load_reward_model_state, save_reward_model_state

    step = step_with(["reward.mode=rule", "reward.judge_rejected=true", "judge.backend=gold",
                      "rm_update.pair_metrics=false"], GoldJudge())
    step.judge.label([roll("a", "55", "55")])
    save_reward_model_state(step, tmp_path / "ok")
    step.judge.verdicts.clear()
    load_reward_model_state(step, tmp_path / "ok")
    assert len(step.judge.verdicts) == 1
    (tmp_path / "none").mkdir()
    with pytest.raises(UserError, match="holds no judge.json"):
        load_reward_model_state(step, tmp_path / "none")
    for text, message in (("{cut", "is not JSON"), ("[1, 2]", "judge.json: the judge's saved")):
        (tmp_path / "bad").mkdir(exist_ok=True)
        (tmp_path / "bad" / "judge.json").write_text(text)
        with pytest.raises(UserError, match=message):
            load_reward_model_state(step, tmp_path / "bad")

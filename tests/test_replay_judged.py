"""``rm_update.replay_judged``: the pairs the judge labelled, kept and replayed in later updates
(cooper.rl.replay), on a real step with a tiny reward model and the gold judge."""

from __future__ import annotations

import math
from functools import partial

import pytest

from cooper.config import load_config
from cooper.config.engine import ConfigError
from cooper.errors import UserError
from cooper.rl.replay import Replay, judged_pairs
from cooper.types import Pair, Rollout


def pair(i: int, pid: str = "p") -> Pair:
    return Pair(pid, "q", "55", f"right {i}", f"wrong {i}", "rollout")


def test_only_pairs_with_a_judged_member_are_kept_for_replay():
    pairs = [pair(0), pair(1), pair(2), pair(3, "other")]
    pool = [Rollout("p", "q", "55", "right 0", True, "55", judged=True),  # the judge's yes
            Rollout("p", "q", "55", "wrong 1", False, None, judged=False),  # the judge's no
            Rollout("p", "q", "55", "right 2", True, "55"),  # the rule's yes: not judged
            Rollout("p", "q", "55", "wrong 2", False, "54"),
            Rollout("p", "q", "55", "right 3", True, None, judged=True)]  # another problem's
    assert judged_pairs(pairs, pool) == [pair(0), pair(1)]


def test_a_step_draws_only_what_earlier_steps_kept_seeded_and_within_capacity():
    r = Replay(judged_per_step=2, seed=3, capacity=3)
    assert r.draw(1) == ([], [])  # nothing kept yet: the step's own pairs are not replayed
    r.keep([pair(0), pair(1)])
    rows, judged = r.draw(2)
    assert rows == [] and sorted(judged, key=lambda p: p.positive) == [pair(0), pair(1)]
    r.keep([pair(2), pair(3), pair(0)])  # pair 0 again: kept once, now the newest
    assert list(r.judged.values()) == [pair(2), pair(3), pair(0)]  # pair 1, the oldest, dropped
    assert r.draw(5) == r.draw(5) and len(r.draw(5)[1]) == 2
    again = Replay(judged_per_step=2, seed=3, capacity=3)
    again.load_state_dict(r.state_dict())
    assert again.judged == r.judged and again.draw(5) == r.draw(5)
    for bad in ({"judged": [{"positive": "x"}]}, {"judged": "x"}, [1]):  # refused, not half loaded
        with pytest.raises(UserError, match="delete it to resume"):
            again.load_state_dict(bad)
    assert again.judged == r.judged
    off = Replay()
    off.keep([pair(0)])
    assert off.judged == {} and off.draw(1) == ([], [])


def test_draws_are_samples_that_change_with_the_step_and_the_seed():
    """Both replays draw a seeded sample per step, not the same first rows every step: a fixed
    draw would replay a handful of rows for the whole run."""
    pool = [pair(i) for i in range(12)]
    r = Replay(pool, rows_per_step=3, judged_per_step=2, seed=3)
    r.keep(pool[:6])
    draws = [r.draw(step) for step in range(1, 41)]
    for rows, judged in draws:
        assert len(rows) == len(set(rows)) == 3 and set(rows) <= set(pool)
        assert len(judged) == len(set(judged)) == 2 and set(judged) <= set(pool[:6])
    assert len({tuple(rows) for rows, _ in draws}) > 10  # 220 subsets of 3
    assert len({tuple(judged) for _, judged in draws}) > 5  # 15 subsets of 2
    assert {p for rows, _ in draws for p in rows} == set(pool)  # every row gets replayed
    other = Replay(pool, rows_per_step=3, judged_per_step=2, seed=4)
    other.keep(pool[:6])
    assert [other.draw(step) for step in range(1, 41)] != draws


def test_replay_judged_needs_the_judges_labels():
    with pytest.raises(ConfigError, match="rm_update.labels=judge"):
        load_config(None, ["reward.mode=cooper", "rm_update.replay_judged=4"]).validate()
    with pytest.raises(ConfigError, match="replay_judged must be >= 0"):
        load_config(None, ["rm_update.replay_judged=-1"]).validate()


def test_judged_pairs_of_one_step_are_replayed_in_the_next_and_survive_a_checkpoint(tmp_path):
    """Step 1: the right answer in words is judged right and paired with the two judged wrong
    ones, so 2 judged pairs are kept. Step 2: answers in digits, which the rule reads, so its
    pairs are the rule's; its update adds the 2 judged pairs of step 1 and keeps nothing new. A
    checkpoint carries them to a new process."""
    pytest.importorskip("torch")
    from cooper.experiment.testbed import tiny_arith_models
    from cooper.labelling.judge import GoldJudge
    from cooper.rl.checkpoints import load_reward_model_state, save_reward_model_state
    from cooper.rl.judging import RolloutJudge
    from cooper.rl.step import CooperReward
    from cooper.rl.step_metrics import stage2_metrics
    from cooper.rm.update import load_reward_model
    from cooper.verify.verifier import verify_batch

    rm_dir = tiny_arith_models() / "reward"
    cfg = load_config(None, ["reward.mode=hybrid_cooper", f"reward.model={rm_dir}",
                             "rm_update.negatives=rollouts", "rm_update.labels=judge",
                             "rm_update.replay_judged=4", "judge.backend=gold",
                             "judge.budget=1.0", "judge.threshold=0.0"]).validate()

    def new_step() -> CooperReward:
        rm, updater = load_reward_model(rm_dir, plan=cfg.plan(), update=cfg.rm_update)
        return CooperReward.from_config(cfg, rm=rm, updater=updater,
                                        judge=RolloutJudge(GoldJudge()),
                                        verify=partial(verify_batch, mode="strict", timeout_s=10))

    step = new_step()
    words = ["50 + 5 = 55. The answer is \\boxed{fifty-five}.",
             "50 + 5 = 54. The answer is \\boxed{fifty-four}.",
             "50 + 5 = 56. The answer is \\boxed{fifty-six}."]
    step.score(["p"] * 3, ["What is 50 + 5?"] * 3, ["55"] * 3, words, step=1)
    st = step.update()
    assert st.pairs == 2 and st.pairs_replay_judged == 0 and st.updated
    assert {p.positive for p in step.replay.judged.values()} == {words[0]}
    assert {p.negative for p in step.replay.judged.values()} == set(words[1:])
    digits = ["50 + 5 = 55. The answer is \\boxed{55}.", "50 + 5 = 54. The answer is \\boxed{54}."]
    step.score(["p"] * 2, ["What is 50 + 5?"] * 2, ["55"] * 2, digits, step=2)
    st = step.update()
    # the rule's pair (its "no" read two different numbers, and threshold 0 sends it to the
    # judge, who calls it wrong: a judged pair too) and the 2 of step 1
    assert st.pairs_replay_judged == 2 and st.pairs == 3 and math.isfinite(st.loss)
    assert stage2_metrics(st)["rm/pairs_replay_judged"] == 2
    kept = dict(step.replay.judged)
    assert len(kept) == 3
    save_reward_model_state(step, tmp_path)
    resumed = new_step()
    load_reward_model_state(resumed, tmp_path)
    assert resumed.replay.judged == kept
    (tmp_path / "replay_judged.json").write_text('{"judged": [')  # a file cut short
    with pytest.raises(UserError, match="is not JSON"):
        load_reward_model_state(new_step(), tmp_path)

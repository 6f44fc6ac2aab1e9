"""Negatives from the policy's own rollouts: hardest first, per positive, and the lenient guard.

A rollout the strict verifier calls wrong is a negative only when the lenient reading (its
last number) agrees: "2 + 2 makes 4" has no boxed answer, so the strict parser misses it, but
it is a correct answer and must never be taught as a wrong one.
"""

from __future__ import annotations

import contextlib
from functools import partial

import pytest

from cooper.config import load_config
from cooper.rl.pairs import rollout_negatives
from cooper.rl.step import CooperReward
from cooper.rm.update import PairwiseStats
from cooper.types import Rollout
from cooper.verify.verifier import verify_batch


def R(text, correct, score, pid="p"):
    return Rollout(pid, "What is 2 + 2?", "4", text, correct, None, score)


def test_hardest_first_each_text_once_at_most_k():
    pos = R("so \\boxed{4}", True, 0.9)
    group = [pos, R("a", False, 0.2), R("b", False, 0.8), R("b", False, 0.8), R("c", False, None),
             R("d", False, 0.5), R("e", True, 0.7), R("x", False, 0.99, pid="other")]
    assert [r.completion for r in rollout_negatives(pos, group, 2)] == ["b", "d"]
    assert [r.completion for r in rollout_negatives(pos, group, 10)] == ["b", "d", "a", "c"]
    assert [r.completion for r in rollout_negatives(pos, group, 10, excluded={"b"})] == \
        ["d", "a", "c"]
    assert rollout_negatives(pos, [pos, R("e", True, 0.1)], 2) == []
    with pytest.raises(ValueError):
        rollout_negatives(pos, group, 0)


class ScoresByText:
    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def score(self, triples, batch_size=16, **_):
        return [self.scores[t.completion] for t in triples]


class RecordingUpdater:
    def __init__(self):
        self.calls = []

    def keeping_states(self):
        return contextlib.nullcontext()

    def step(self, positives, negatives, *, reduce_grads=None, global_pairs=None):
        self.calls.append(([t.completion for t in positives], [t.completion for t in negatives]))
        return PairwiseStats(0.3, 1.0, 0.1, len(positives), False, 1.0)


@pytest.mark.parametrize("k", [1, 2])
def test_cooper_pairs_each_positive_with_its_hardest_trusted_wrong_rollouts(k):
    texts = {"so \\boxed{4}": 0.6,           # correct: the positive
             "2 + 2 makes 4": 0.95,          # strict: no answer; lenient: correct -> ambiguous
             "so \\boxed{5}": 0.9,           # wrong, the hardest
             "so \\boxed{6}": 0.5,
             "so \\boxed{7}": 0.2}
    cfg = load_config(None, ["reward.mode=cooper", "reward.model=x", "rm_update.negatives=rollouts",
                             f"rm_update.negatives_per_positive={k}"])
    updater = RecordingUpdater()
    cooper = CooperReward.from_config(cfg, rm=ScoresByText(texts), updater=updater,
                          verify=partial(verify_batch, mode="strict"),
                          verify_lenient=partial(verify_batch, mode="lenient"))
    completions = list(texts)
    rollouts, stats, _ = cooper.score(["p"] * 5, ["What is 2 + 2?"] * 5, ["4"] * 5, completions,
                                      step=1)
    assert [r.correct for r in rollouts] == [True, False, False, False, False]
    st = cooper.update()
    expected = ["so \\boxed{5}", "so \\boxed{6}"][:k]
    assert updater.calls == [(["so \\boxed{4}"] * k, expected)]
    assert (st.pairs, st.pairs_rollout, st.pairs_assistant) == (k, k, 0)
    assert st.negatives_ambiguous == 1 and st.dropped == 0
    assert st.loss == pytest.approx(0.3) and st.changed_fraction == 1.0
    # the calibration-free metrics of the step: the top score (0.95) went to a wrong rollout
    assert stats.top_wrong == 1.0 and 0 < stats.group_auroc < 1


def test_a_rollout_whose_check_timed_out_is_never_a_negative():
    from cooper.verify.verifier import Verdict

    texts = {"so \\boxed{4}": 0.6, "so \\boxed{5}": 0.9, "so \\boxed{6}": 0.5}

    def lenient(completions, references):  # the hardest wrong rollout's check times out
        return [Verdict(False, None, "timeout") if c == "so \\boxed{5}" else v
                for c, v in zip(completions, verify_batch(completions, references,
                                                          mode="lenient"), strict=True)]

    cfg = load_config(None, ["reward.mode=cooper", "reward.model=x", "rm_update.negatives=rollouts",
                             "rm_update.negatives_per_positive=2"])
    updater = RecordingUpdater()
    cooper = CooperReward.from_config(cfg, rm=ScoresByText(texts), updater=updater,
                                      verify=partial(verify_batch, mode="strict"),
                                      verify_lenient=lenient)
    cooper.score(["p"] * 3, ["What is 2 + 2?"] * 3, ["4"] * 3, list(texts), step=1)
    st = cooper.update()
    assert updater.calls == [(["so \\boxed{4}"], ["so \\boxed{6}"])]
    assert st.negatives_ambiguous == 1


def test_a_wrong_rollout_the_rule_could_not_read_is_still_a_negative():
    """rm_update.negatives_readable is removed: a right answer in words is wrong to the rule and,
    under rule labels, a negative (the judge, rm_update.labels=judge, decides such rollouts)."""
    texts = {"so \\boxed{55}": 0.6, "so \\boxed{fifty-five}": 0.9, "so \\boxed{54}": 0.5}
    cfg = load_config(None, ["reward.mode=cooper", "reward.model=x", "rm_update.negatives=rollouts",
                             "rm_update.negatives_per_positive=2"])
    updater = RecordingUpdater()
    cooper = CooperReward.from_config(cfg, rm=ScoresByText(texts), updater=updater,
                                      verify=partial(verify_batch, mode="strict"),
                                      verify_lenient=partial(verify_batch, mode="lenient"))
    cooper.score(["p"] * 3, ["What is 50 + 5?"] * 3, ["55"] * 3, list(texts), step=1)
    st = cooper.update()
    assert updater.calls == [(["so \\boxed{55}"] * 2, ["so \\boxed{fifty-five}", "so \\boxed{54}"])]
    assert st.negatives_ambiguous == 0


def test_the_update_reuses_the_scoring_pass_of_training_steps_only(tiny_models):
    from cooper.rm.model import RewardModel
    from cooper.rm.update import PairwiseUpdater

    texts = ["so \\boxed{4}", "so \\boxed{5}", "so \\boxed{6}"]
    cfg = load_config(None, ["reward.mode=cooper", "reward.model=x", "rm_update.negatives=rollouts"])
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    rm.train_top_layers(1)  # as rm_update.train_layers=1
    updater = PairwiseUpdater(rm)
    cooper = CooperReward.from_config(cfg, rm=rm, updater=updater, verify=partial(verify_batch, mode="strict"),
                          verify_lenient=partial(verify_batch, mode="lenient"))
    args = (["p"] * 3, ["What is 2 + 2?"] * 3, ["4"] * 3, texts)
    cooper.score(*args, step=0, training=False)
    assert len(updater.step_states) == 0  # an evaluation keeps nothing
    cooper.score(*args, step=1)
    assert len(updater.step_states) == 3
    st = cooper.update()
    assert st.pairs == 2 and st.updated
    # both pairs' members came from the scoring pass (their shared positive once); nothing is
    # kept after the update
    assert (updater.step_states.reused, updater.step_states.computed) == (3, 0)
    assert len(updater.step_states) == 0


def test_both_sources_make_pairs_and_rollouts_need_no_assistant():
    from cooper.rl.negatives import NegativeWriter, RewriteNegatives

    texts = {"2 + 2 = 4. The answer is \\boxed{4}.": 0.6, "so \\boxed{5}": 0.9}
    refs = ["4", "4"]
    verify = partial(verify_batch, mode="strict")
    for mode, assistant_pairs in (("rollouts", 0), ("both", 1), ("assistant", 1)):
        cfg = load_config(None, ["reward.mode=cooper", "reward.model=x",
                                 f"rm_update.negatives={mode}", "assistant.backend=rewrite"])
        writer = (NegativeWriter(RewriteNegatives(), None, verify, 1) if mode != "rollouts"
                  else None)
        cooper = CooperReward.from_config(cfg, rm=ScoresByText(texts), updater=RecordingUpdater(),
                              verify=verify, negatives=writer)
        cooper.score(["p", "p"], ["q", "q"], refs, list(texts), step=0)
        st = cooper.update()
        rollout_pairs = 0 if mode == "assistant" else 1
        assert (st.pairs_rollout, st.pairs_assistant) == (rollout_pairs, assistant_pairs), mode
        assert st.pairs == rollout_pairs + assistant_pairs


def test_a_positive_without_a_wrong_rollout_is_counted_as_dropped():
    cfg = load_config(None, ["reward.mode=rm", "reward.model=x", "rm_update.negatives=rollouts"])
    cooper = CooperReward.from_config(cfg, rm=ScoresByText({"so \\boxed{4}": 0.5, "x \\boxed{4}": 0.4}),
                          updater=None, verify=partial(verify_batch, mode="strict"))
    cooper.score(["p", "p"], ["q", "q"], ["4", "4"], ["so \\boxed{4}", "x \\boxed{4}"], step=0)
    st = cooper.update()
    assert (st.positives, st.pairs, st.dropped) == (1, 0, 1) and st.loss is None
    assert st.grad_norm is None and not st.updated  # a frozen reward model is never updated


def test_a_frozen_reward_model_is_measured_on_the_logits_scoring_computed(tiny_models):
    import torch

    from cooper.rm.model import RewardModel
    from cooper.types import Triple

    texts = [f"so \\boxed{{4}}{' ' * i}" for i in range(3)] + [f"so \\boxed{{{5 + i}}}"
                                                                for i in range(3)]
    cfg = load_config(None, ["reward.mode=rm", "reward.model=x", "rm_update.negatives=rollouts",
                             "rm_update.positives_per_prompt=3", "rm_update.negatives_per_positive=3"])
    rm = RewardModel.load(tiny_models.reward, max_length=256)
    rm.model.train()
    cooper = CooperReward.from_config(cfg, rm=rm, updater=None,
                                      verify=partial(verify_batch, mode="strict"))
    cooper.score(["p"] * 6, ["q"] * 6, ["4"] * 6, texts, step=0)
    st = cooper.update()
    assert st.pairs == 9
    # the six texts ran through the model once, when scored; the pairs reread those logits
    assert (cooper.memo.misses, cooper.memo.hits) == (6, 6)
    rm.model.eval()
    with torch.no_grad():
        logits = rm.full_logits([rm.encode(Triple("q", "4", t)) for t in texts])  # [6]
    margins = logits[:3, None] - logits[None, 3:]  # [3, 3]: every positive against every negative
    assert st.loss == pytest.approx(-torch.nn.functional.logsigmoid(margins).mean().item(),
                                    abs=1e-5)
    assert st.pair_acc_before == pytest.approx((margins > 0).float().mean().item())
    assert st.grad_norm is None and not st.updated


def test_a_reward_model_that_is_updated_remembers_nothing():
    cfg = load_config(None, ["reward.mode=cooper", "reward.model=x", "rm_update.negatives=rollouts"])
    cooper = CooperReward.from_config(cfg, rm=ScoresByText({}), updater=RecordingUpdater(),
                                      verify=partial(verify_batch, mode="strict"))
    assert cooper.memo is None


class CountingScores(ScoresByText):
    def __init__(self, scores):
        super().__init__(scores)
        self.calls = 0

    def score(self, triples, batch_size=16, **kw):
        self.calls += 1
        return super().score(triples, batch_size, **kw)

    def raw_logits(self, triples, batch_size=16, **_):
        return [0.0 for _ in triples]


@pytest.mark.parametrize("mode", ["rule", "rm", "cooper"])
def test_a_reward_model_that_only_watches_watches_every_nth_training_step(mode):
    texts = {"so \\boxed{4}": 0.6, "so \\boxed{5}": 0.9}
    cfg = load_config(None, [f"reward.mode={mode}", "reward.model=x",
                             "rm_update.negatives=rollouts", "reward.monitor_every=3"])
    rm = CountingScores(texts)
    cooper = CooperReward.from_config(cfg, rm=rm, updater=RecordingUpdater(),
                                      verify=partial(verify_batch, mode="strict"))
    watched, measured = [], []
    for step in range(7):
        rollouts, stats, seconds = cooper.score(["p", "p"], ["q", "q"], ["4", "4"], list(texts),
                                                step=step)
        st = cooper.update()
        watched.append(stats.rm_mean is not None)
        measured.append(st is not None and st.pairs == 1)
        # the verdicts (what pays in rule mode) are the same on every step
        assert [r.correct for r in rollouts] == [True, False]
        assert ("rm_score" in seconds) == watched[-1]
    # rule mode: the reward model scores and the pairs are measured on steps 0, 3 and 6 only;
    # where it pays (rm, cooper), every step, whatever monitor_every says
    expected = [s % 3 == 0 for s in range(7)] if mode == "rule" else [True] * 7
    assert watched == expected and measured == expected and rm.calls == sum(expected)
    # validation (not training) is always scored
    _, stats, _ = cooper.score(["p", "p"], ["q", "q"], ["4", "4"], list(texts), step=1,
                               training=False)
    assert stats.rm_mean is not None


def test_monitor_every_must_be_positive():
    from cooper.config.engine import ConfigError

    with pytest.raises(ConfigError, match="reward.monitor_every must be >= 1"):
        load_config(None, ["reward.mode=rule", "reward.monitor_every=0"]).validate()

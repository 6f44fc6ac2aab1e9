"""The CPU testbed's parts since its second round: the arith_2x1 task, a reward model cut from
a trunk, and the third round's initial data without near misses (rm_init.min_change)."""

from __future__ import annotations

import json

import pytest
import torch

from cooper.config.experiment import load_experiment, trunk_layers
from cooper.data.problems import load_problems
from cooper.errors import UserError
from cooper.infra.models import embedded_trunk, load_causal_lm
from cooper.rm.model import RewardModel
from cooper.types import Triple


def test_arith_2x1_splits_are_disjoint_complete_and_right():
    splits = {s: load_problems("arith_2x1", s) for s in ("train", "validation", "test")}
    assert {s: len(p) for s, p in splits.items()} == {"train": 1200, "validation": 300, "test": 300}
    questions = {s: {p.question for p in ps} for s, ps in splits.items()}
    assert all(len(q) == len(splits[s]) for s, q in questions.items())  # no repeats in a split
    assert not questions["train"] & questions["test"]
    assert not questions["train"] & questions["validation"]
    assert not questions["validation"] & questions["test"]
    # together: every sum of a two-digit and a one-digit number, in both orders
    every = {f"What is {a} + {b}?" for a in range(10, 100) for b in range(10)}
    every |= {f"What is {b} + {a}?" for a in range(10, 100) for b in range(10)}
    assert set().union(*questions.values()) == every
    for p in splits["test"]:
        a, b = (int(x) for x in p.question[len("What is "):-1].split(" + "))
        assert p.reference == str(a + b) and p.solution.endswith(f"\\boxed{{{a + b}}}.")
    assert [p.question for p in load_problems("arith_2x1", "test")] == \
        [p.question for p in splits["test"]]  # the same on every call


def test_trunk_names():
    assert trunk_layers("embedded-trunk-4") == 4
    assert trunk_layers("tiny-arith") is None
    for bad in ("embedded-trunk-0", "embedded-trunk-x", "embedded-trunk-", "embedded-trunk--2"):
        with pytest.raises(UserError, match="positive integer"):
            trunk_layers(bad)
        # refused when the settings are checked, before any stage runs
        with pytest.raises(UserError, match="setup.reward_model='embedded-trunk-"):
            load_experiment("hacking_cpu", [f"setup.reward_model={bad}"]).validate()


def test_initial_data_without_near_misses(tmp_path):
    """rm_init.min_change (the third round's setting, 10): every wrong answer of the reward
    model's initial data is further than that from the reference."""
    from cooper.data.perturb import answer_change
    from cooper.data.triples import load_triples
    from cooper.experiment.setup import _triples_file

    r = load_experiment("hacking_cpu", ["rm_init.min_change=10"]).validate().rm_init
    assert r.min_change == 10.0
    rows = load_triples(_triples_file(tmp_path / "t.jsonl", r.dataset, r.split, 200, 0, r.unfinished,
                                      r.min_change)).rows
    assert len(rows) == 200 and sum(t.label for t in rows) == 100
    assert all(answer_change(t.triple.completion, t.triple.reference) > 10
               for t in rows if not t.label)
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(UserError, match="rm_init.min_change must be a finite number >= 0"):
            load_experiment("hacking_cpu", [f"rm_init.min_change={bad}"]).validate()


def test_trunk_keeps_the_first_layers_exactly(tiny_models, tmp_path):
    full = load_causal_lm(tiny_models.policy, dtype="float32").eval()
    cut = embedded_trunk(1, source=tiny_models.policy, cache=tmp_path)
    assert embedded_trunk(1, source=tiny_models.policy, cache=tmp_path) == cut  # built once
    trunk = load_causal_lm(cut, dtype="float32").eval()
    assert trunk.config.num_hidden_layers == 1 and len(trunk.model.layers) == 1
    ids = torch.tensor([[5, 9, 17, 3, 11]])
    with torch.no_grad():
        # the full model's first layer's output, through the final norm, is the trunk's output
        want = full.model.norm(full(ids, output_hidden_states=True).hidden_states[1])  # [1, 5, H]
        got = trunk.model(ids).last_hidden_state  # [1, 5, H]
    torch.testing.assert_close(got, want)
    rm = RewardModel.load(cut, dtype="float32")  # a new score head on the cut trunk
    [p] = rm.score([Triple("What is 1 + 2?", "3", "1 + 2 = 3.")])
    assert 0.0 < p < 1.0
    with pytest.raises(UserError, match="at most 2"):
        embedded_trunk(3, source=tiny_models.policy, cache=tmp_path)


@pytest.mark.slow
def test_experiment_setup_trains_a_reward_model_on_the_embedded_trunk(tmp_path):
    """setup.reward_model=embedded-trunk-1 through the real CLI: the cut is built (or reused)
    in the model cache, trained briefly into the setup folder, and used by an arm."""
    from conftest import run_cli
    from test_experiment import TINY

    out = tmp_path / "trunk"
    run_cli("experiment", "hacking", "--preset", "hacking_cpu", "--out", out, *TINY,
            "setup.reward_model=embedded-trunk-1", "rm_init.train_layers=1",
            "train.rm_update.train_layers=1", "arms=cooper_rollouts",
            "setup.policy_accuracy_min=null", "setup.policy_accuracy_max=null",
            "probe.min_accuracy=null", "--no-report")  # a random policy: the setup's checks off
    setup = json.loads((out / "seed-0" / "setup" / "setup.json").read_text())
    trained = out / "seed-0" / "setup" / "reward_model"
    assert setup["setup"]["reward_model"] == "reward_model"  # relative: the folder may move
    config = json.loads((trained / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["hidden_size"] == 576  # the embedded's
    cut = embedded_trunk(1)
    assert json.loads((cut / "config.json").read_text())["num_hidden_layers"] == 1
    from cooper.infra.models import resolve
    assert resolve("embedded-trunk-1") == cut  # the same cut by its name (`--base` of rm train)
    from safetensors.torch import load_file
    before = load_file(cut / "model.safetensors")
    after = load_file(trained / "model.safetensors")
    name = "model.layers.0.mlp.down_proj.weight"
    assert before[name].shape == after[name].shape  # the cut's layer ...
    assert not torch.equal(before[name], after[name])  # ... trained
    arm = json.loads((out / "seed-0" / "arms" / "cooper_rollouts" / "arm.json").read_text())
    assert arm["train"]["steps"] == 2

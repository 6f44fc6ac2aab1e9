"""Presets that start from another (``base: NAME``): the chain is resolved once, in
:func:`cooper.config.engine.read_preset`, for ``cooper train`` and experiment presets alike."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from cooper.config import load_config
from cooper.config.engine import ConfigError, deep_merge, get_key, nest_settings
from cooper.config.experiment import load_experiment

DATA = Path(__file__).resolve().parent / "data"


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_deep_merge_merges_mappings_and_replaces_the_rest():
    base = {"a": {"b": 1, "c": {"d": 2}}, "e": [1, 2], "f": "x"}
    over = {"a": {"c": {"g": 3}}, "e": [3], "f": {"h": 4}}
    assert deep_merge(base, over) == {"a": {"b": 1, "c": {"d": 2, "g": 3}}, "e": [3],
                                      "f": {"h": 4}}
    assert base["a"]["c"] == {"d": 2}  # the base is left as it was
    # dotted keys are nested first, so they merge like nested ones; arm names stay keys
    assert nest_settings({"train.rollout.top_p": 0.9, "train": {"seed": 3},
                          "arms": {"a.b": {"reward.mode": "rm"}}}, named=("arms",)) == {
        "train": {"rollout": {"top_p": 0.9}, "seed": 3}, "arms": {"a.b": {"reward": {"mode": "rm"}}}}


def test_dotted_and_nested_keys_merge_across_the_chain(tmp_path):
    write(tmp_path / "base.yaml", "base: hacking_cpu\n"
          "train:\n  rollout.samples_per_prompt: 8\n  policy: {lr: 2.0e-4, warmup_steps: 5}\n")
    child = write(tmp_path / "child.yaml", "base: base.yaml\n"
                  "train.rollout: {max_completion_length: 20}\n"
                  "train:\n  policy.lr: 3.0e-4\n"
                  "rm_init.epochs: 7\n")
    exp = load_experiment(child).validate()
    shipped = load_experiment("hacking_cpu")
    assert exp.train.rollout.samples_per_prompt == 8  # from base.yaml
    assert exp.train.rollout.max_completion_length == 20  # from child.yaml
    assert exp.train.rollout.micro_batch_size == shipped.train.rollout.micro_batch_size
    assert (exp.train.policy.lr, exp.train.policy.warmup_steps) == (3e-4, 5)
    assert exp.rm_init.epochs == 7 and exp.rm_init.triples == shipped.rm_init.triples
    assert exp.train.max_steps == shipped.train.max_steps
    # the same as the shipped preset with the two files' keys as overrides
    same = load_experiment("hacking_cpu", [
        "train.rollout.samples_per_prompt=8", "train.policy.lr=3e-4", "train.policy.warmup_steps=5",
        "train.rollout.max_completion_length=20", "rm_init.epochs=7"]).validate()
    assert exp.to_dict() == same.to_dict()


def test_a_child_overrides_one_arm_key_by_key_and_adds_arms(tmp_path):
    write(tmp_path / "base.yaml", "base: hacking_cpu\narms:\n"
          "  rule: {reward.mode: rule}\n"
          "  cooper:\n    reward.mode: cooper\n    rm_update.lr: 1.0e-4\n    rm_update.epochs: 2\n")
    child = write(tmp_path / "child.yaml", "base: base.yaml\narms:\n"
                  "  cooper:\n    label: Cooper, three epochs\n    rm_update: {epochs: 3}\n"
                  "  cooper.fast: {reward: {mode: cooper}, rm_update.lr: 1.0e-3}\n")
    exp = load_experiment(child).validate()
    # hacking_cpu's arms, then the new one (a '.' in an arm's name is part of the name)
    assert exp.arm_list == ["rule", "rm", "cooper", "cooper_rollouts", "cooper.fast"]
    # cooper through three files: hacking_cpu's, base.yaml's lr and epochs, child.yaml's
    assert exp.arms["cooper"] == {"label": "Cooper, three epochs", "reward.mode": "cooper",
                                  "rm_update.negatives": "assistant",
                                  "rm_update.loss": "bradley_terry", "rm_update.epochs": 3,
                                  "rm_update.lr": 1e-4}
    assert exp.arms["cooper.fast"] == {"reward.mode": "cooper", "rm_update.lr": 1e-3}
    # an arm given a non-mapping value replaces the base's: `rule:` alone is the shared settings
    again = write(tmp_path / "again.yaml", "base: child.yaml\narms:\n  rule:\n")
    assert load_experiment(again).validate().arms["rule"] == {}
    # the string form replaces the base's arms as a whole; so does a mapping over it
    modes = write(tmp_path / "modes.yaml", "base: child.yaml\narms: rule,rm\n")
    assert load_experiment(modes).validate().arm_list == ["rule", "rm"]
    named = write(tmp_path / "named.yaml", "base: modes.yaml\narms: {mine: {reward.mode: rm}}\n")
    assert load_experiment(named).validate().arm_list == ["mine"]


def test_an_unknown_base_lists_the_presets_of_its_family(tmp_path):
    exp = write(tmp_path / "e.yaml", "base: hacking_nope\n")
    with pytest.raises(ConfigError, match="unknown experiment preset 'hacking_nope'") as e:
        load_experiment(exp)
    assert "hacking_cpu" in str(e.value) and "e.yaml: base:" in str(e.value)
    assert "demo_cpu" not in str(e.value)  # a train preset is not an experiment's base
    train = write(tmp_path / "t.yaml", "base: hacking_cpu\n")
    with pytest.raises(ConfigError, match="unknown preset 'hacking_cpu'") as e:
        load_config(train)
    assert "demo_cpu" in str(e.value)
    missing = write(tmp_path / "m.yaml", "base: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="config file not found: .*nowhere.yaml"):
        load_config(missing)


def test_a_base_that_is_not_a_name_is_refused(tmp_path):
    for value in ("3", "''", "", "[]", "[a, 3]", "[a, '']", "[[a]]", "{a: b}"):
        path = write(tmp_path / "t.yaml", f"base: {value}\nmax_steps: 2\n")
        with pytest.raises(ConfigError, match="must name the preset this one starts from") as e:
            load_config(path)
        assert "or a list of them, read in order" in str(e.value)


def test_a_list_of_bases_is_read_in_order_a_later_one_on_top(tmp_path):
    """``base: [A, B]``: A (with its own base), then B on top, then the file's own keys; so
    presets share a part, such as arms, from one file."""
    write(tmp_path / "a.yaml", "base: hacking_cpu\ntrain: {max_steps: 200, save_steps: 20}\n"
          "arms:\n  cooper: {rm_update.epochs: 2}\n")
    write(tmp_path / "parts" / "b.yaml", "train: {max_steps: 300}\narms:\n"
          "  cooper: {rm_update.lr: 1.0e-3}\n  mine: {from: cooper, rm_update.epochs: 4}\n")
    child = write(tmp_path / "child.yaml", "base: [a.yaml, parts/b.yaml]\nrm_init.epochs: 5\n")
    exp = load_experiment(child).validate()
    shipped = load_experiment("hacking_cpu")
    assert (exp.train.max_steps, exp.train.save_steps) == (300, 20)  # b.yaml's over a.yaml's
    assert exp.rm_init.epochs == 5 and exp.setup == shipped.setup  # its own; hacking_cpu's
    # arms merge key by key through the list too, in order: a.yaml's (hacking_cpu's first),
    # then b.yaml's; `from:` reaches an arm of any of them
    assert exp.arm_list == [*shipped.arm_list, "mine"]
    assert exp.arms["cooper"] == {**shipped.arms["cooper"], "rm_update.epochs": 2,
                                  "rm_update.lr": 1e-3}
    assert exp.arms["mine"] == {**exp.arms["cooper"], "rm_update.epochs": 4}
    # the other order: a.yaml on top
    other = write(tmp_path / "other.yaml", "base: [parts/b.yaml, a.yaml]\n")
    assert load_experiment(other).train.max_steps == 200
    # two bases may share a base of their own (hacking_cpu here): not a loop
    both = write(tmp_path / "both.yaml", "base: [a.yaml, hacking_cpu]\n")
    assert load_experiment(both).train.max_steps == shipped.train.max_steps
    # a train preset takes a list too
    train = write(tmp_path / "t.yaml", "base: [demo_cpu, more.yaml]\n")
    write(tmp_path / "more.yaml", "max_steps: 3\n")
    assert load_config(train).to_dict() == load_config("demo_cpu", ["max_steps=3"]).to_dict()


def test_a_loop_through_a_list_of_bases_shows_the_chain(tmp_path):
    a = write(tmp_path / "a.yaml", "base: [hacking_cpu, b.yaml]\n")
    write(tmp_path / "b.yaml", "base: [c.yaml]\n")
    write(tmp_path / "c.yaml", "base: [hacking_cpu, a.yaml]\n")
    with pytest.raises(ConfigError, match=r"chain loops: a -> b.yaml -> c.yaml -> a.yaml"):
        load_experiment(a)
    missing = write(tmp_path / "m.yaml", "base: [hacking_cpu, gone.yaml]\n")
    with pytest.raises(ConfigError, match="m.yaml: base: config file not found: .*gone.yaml"):
        load_experiment(missing)


def test_a_cycle_shows_the_chain(tmp_path):
    a = write(tmp_path / "a.yaml", "base: b.yaml\nmax_steps: 1\n")
    write(tmp_path / "b.yaml", "base: a.yaml\nmax_steps: 2\n")
    with pytest.raises(ConfigError, match="chain loops: a -> b.yaml -> a.yaml"):
        load_config(a)
    me = write(tmp_path / "me.yaml", "base: ./me.yaml\n")
    with pytest.raises(ConfigError, match=r"chain loops: me -> \./me\.yaml"):
        load_experiment(me)


def test_a_relative_base_is_read_from_the_folder_of_the_file_that_names_it(tmp_path,
                                                                            monkeypatch):
    write(tmp_path / "presets" / "shared.yaml", "base: hacking_cpu\ntrain: {max_steps: 9}\n")
    child = write(tmp_path / "presets" / "exp" / "child.yaml",
                  "base: ../shared.yaml\nseeds: 0,1\n")
    monkeypatch.chdir(tmp_path)  # not the folder of either file
    exp = load_experiment(child)
    assert exp.train.max_steps == 9 and exp.seeds == "0,1"


def test_a_train_preset_with_a_base(tmp_path):
    child = write(tmp_path / "mine.yaml", "# demo_cpu, longer and paid by the verifier\n"
                  "base: demo_cpu\nmax_steps: 12\nreward.mode: rule\n"
                  "rollout: {samples_per_prompt: 4}\n")
    cfg = load_config(child, ["seed=5"])
    want = load_config("demo_cpu", ["max_steps=12", "reward.mode=rule",
                                     "rollout.samples_per_prompt=4", "seed=5"])
    assert cfg.to_dict() == want.to_dict()
    assert cfg.rollout.micro_batch_size == 2 and cfg.rm_update.train_layers == 4  # demo_cpu's


def leaves(tree: dict, path: tuple = ()) -> dict[tuple, object]:
    """Every value of a nested mapping by its path of keys (arm names and dotted arm keys kept
    whole)."""
    out: dict[tuple, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(leaves(value, (*path, key)))
        else:
            out[(*path, key)] = value
    return out


def test_hacking_cpu_is_the_fifth_round_with_validation_every_25_steps():
    """hacking_cpu took over the fifth round's preset (hacking_cpu_v5, whose resolved settings
    the fixture kept when it was removed) with one change: the held-out curves' cadence. Since
    then it also scores each arm's last five policies (settings added after the fifth round;
    they change what the report's headline is, not how any arm trains), and the blind-rule
    testbed's settings, each at its default, which leaves the rule the judge and the rollout
    negatives as they were; and the rule arm's reward model watches every 5th step, which its
    policy does not see (reward.monitor_every). The judge's settings came after too: no judge
    (judge.backend none), so nothing is judged, paid by a judge or replayed (rows, or forms cut
    from the rollouts: rm_update.replay, rm_update.rollout_forms); and the
    hybrid pay's scope (reward.hybrid_scores) and what pays in it (reward.judge_pays,
    reward.rm_verdicts), at their defaults, which no arm of it uses."""
    v5 = leaves(yaml.safe_load((DATA / "hacking_cpu_v5_resolved.yaml").read_text()))
    exp = load_experiment("hacking_cpu").validate()
    # the shared train section as an arm of the default mode resolves it (TrainConfig.resolve)
    now = leaves({**exp.to_dict(), "train": copy.deepcopy(exp.train).resolve().to_dict()})
    judge = {k for k in now if k[:2] == ("train", "judge")}
    assert now[("train", "judge", "backend")] == "none" and len(judge) > 10
    now = {k: v for k, v in now.items() if k not in judge}
    added = {("final_eval", "policies"): 5, ("final_eval", "every_steps"): 25,
             ("train", "keep_policy_steps"): None,
             ("setup", "rule_missed_min"): None, ("setup", "rule_missed_max"): None,
             ("probe", "min_recall_missed"): None, ("train", "validation", "judge"): "rule",
             ("train", "reward", "monitor_every"): 1, ("arms", "rule", "reward.monitor_every"): 5,
             ("train", "reward", "judge_rejected"): False, ("train", "rm_update", "labels"): "rule",
             ("train", "rm_update", "replay"): 0, ("train", "rm_update", "replay_file"): None,
             ("train", "rm_update", "rollout_forms"): 0,
             ("train", "reward", "hybrid_scores"): "rejected",
             ("train", "reward", "judge_pays"): False, ("train", "reward", "rm_verdicts"): False}
    assert set(now) == set(v5) | set(added)
    assert {k: now[k] for k in added} == added
    assert {k: (v5[k], now[k]) for k in v5 if now[k] != v5[k]} == {
        ("train", "validation", "every_steps"): (10, 25)}


def test_print_config_prints_the_resolved_settings(tmp_path):
    """--print-config shows what the chain resolves to (no base: key): the output, read back as
    a preset, gives the same settings."""
    exp = write(tmp_path / "exp.yaml", "base: hacking_cpu\ntrain.max_steps: 7\n"
                "arms:\n  cooper: {rm_update.epochs: 2}\n")
    out = yaml.safe_load(run_cli("experiment", "hacking", "--preset", exp, "--out",
                                 tmp_path / "x", "--print-config").stdout)
    assert "base" not in out and not (tmp_path / "x").exists()
    assert out["train"]["max_steps"] == 7
    assert out["arms"]["cooper"] == {"reward.mode": "cooper", "rm_update.negatives": "assistant",
                                     "rm_update.loss": "bradley_terry", "rm_update.epochs": 2}
    assert out == load_experiment(exp).to_dict()

    train = write(tmp_path / "train.yaml", "base: demo_cpu\nmax_steps: 9\nreward.mode: rule\n")
    printed = yaml.safe_load(run_cli("train", "--config", train, "--print-config").stdout)
    assert "base" not in printed and printed["max_steps"] == 9
    assert printed["reward"]["mode"] == "rule"
    assert printed["rollout"]["micro_batch_size"] == 2  # demo_cpu's
    cfg = load_config(train).resolve()  # printed as the run uses them (reward.mode's defaults)
    assert {k: v for k, v in printed.items() if k != "grpo"} == cfg.to_dict()
    assert get_key(cfg, "rm_update.train_layers") == printed["rm_update"]["train_layers"]

"""Arms as named sets of `cooper train` settings, and the seeds setting (no training here)."""

from __future__ import annotations

import pytest
import yaml

from cooper.config.arms import declare_arms, select_arms
from cooper.config.engine import ConfigError, nest
from cooper.config.experiment import load_experiment


def preset(tmp_path, arms, **extra) -> str:
    """A preset file: hacking_cpu's settings with other arms."""
    from cooper.config.experiment import experiment_dir

    data = yaml.safe_load((experiment_dir() / "hacking_cpu.yaml").read_text())
    data.update(arms=arms, **extra)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_nest_takes_dotted_and_nested_keys_mixed():
    assert nest({"a.b": 1, "a": {"c": 2}, "d": 3}) == {"a": {"b": 1, "c": 2}, "d": 3}
    with pytest.raises(ConfigError, match="sets a key inside a value"):
        nest({"a": 1, "a.b": 2})


def test_arms_are_setting_sets_on_top_of_the_shared_train_section(tmp_path):
    exp = load_experiment(preset(tmp_path, {
        "rule": {"reward.mode": "rule"},
        # nested and dotted keys mixed; YAML reads 1e-4 as text, the field's type decides
        "fast": {"label": "Cooper, fast RM", "reward": {"mode": "cooper"},
                 "rm_update.lr": "1e-4", "rm_update": {"epochs": 3}},
        "shared": None,  # nothing of its own: the train section as it is
    }), ["train.rm_update.lr=5e-4", "train.reward.mode=rm"]).validate()
    assert exp.arm_list == ["rule", "fast", "shared"]
    # the recorded form: flat dotted keys with typed values, the label kept
    assert exp.arms["fast"] == {"label": "Cooper, fast RM", "reward.mode": "cooper",
                                "rm_update.lr": 1e-4, "rm_update.epochs": 3}
    assert exp.arm_label("fast") == "Cooper, fast RM" and exp.arm_label("rule") is None
    fast, shared = exp.arm_train("fast"), exp.arm_train("shared")
    assert (fast.reward.mode, fast.rm_update.lr, fast.rm_update.epochs) == ("cooper", 1e-4, 3)
    assert (shared.reward.mode, shared.rm_update.lr) == ("rm", 5e-4)  # what train says
    assert exp.train.rm_update.lr == 5e-4  # an arm changes its own copy only
    assert fast.rollout.samples_per_prompt == exp.train.rollout.samples_per_prompt == 16
    # --print-config's output is itself a preset that gives the same settings
    again = tmp_path / "printed.yaml"
    again.write_text(yaml.safe_dump(exp.to_dict(), sort_keys=False))
    assert load_experiment(str(again)).validate().to_dict() == exp.to_dict()


def test_the_string_form_is_one_arm_per_reward_mode(tmp_path):
    exp = load_experiment(preset(tmp_path, "rule,rm,cooper")).validate()
    assert exp.arms == {m: {"reward.mode": m} for m in ("rule", "rm", "cooper")}
    assert [exp.arm_train(a).reward.mode for a in exp.arm_list] == ["rule", "rm", "cooper"]
    with pytest.raises(ConfigError, match="bogus is not a reward mode"):
        declare_arms("rule,bogus")


def test_the_shipped_preset_declares_the_paper_arms_and_a_rollout_arm():
    exp = load_experiment("hacking_cpu").validate()
    assert exp.arm_list == ["rule", "rm", "cooper", "cooper_rollouts"]
    paper = exp.arm_train("cooper")
    assert (paper.reward.mode, paper.rm_update.negatives, paper.rm_update.loss,
            paper.rm_update.epochs, paper.assistant.backend) == (
        "cooper", "assistant", "bradley_terry", 1, "rewrite")
    rollouts = exp.arm_train("cooper_rollouts")
    assert (rollouts.rm_update.negatives, rollouts.rm_update.negatives_per_positive) == (
        "rollouts", 2)


def test_an_override_selects_declared_arms_in_its_order():
    exp = load_experiment("hacking_cpu", ["arms=cooper_rollouts,rule"]).validate()
    assert exp.arm_list == ["cooper_rollouts", "rule"]
    assert exp.arm_train("cooper_rollouts").rm_update.negatives == "rollouts"
    # the first round's override still works: declared arms keep their own settings
    old = load_experiment("hacking_cpu", ["arms=rm,cooper"]).validate()
    assert old.arm_list == ["rm", "cooper"] and old.arms["cooper"]["rm_update.epochs"] == 1
    # a reward mode the preset does not declare is its plain arm
    assert select_arms({"a": {"reward.mode": "rule"}}, "rm") == {"rm": {"reward.mode": "rm"}}


@pytest.mark.parametrize("overrides, message", [
    (["arms=rule,bogus"], "no arm named 'bogus'; declared: rule, rm, cooper, cooper_rollouts"),
    (["arms=rule,rule"], "name each arm once"),
    (["arms.cooper.rm_update.lr=1"], "arms are declared in YAML"),
    (["seeds=0,x"], "seeds='0,x': list distinct integers"),
    (["seeds=1,1"], "seeds='1,1'"),
])
def test_bad_selections_and_seeds_say_how_to_fix(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment("hacking_cpu", overrides).validate()


@pytest.mark.parametrize("arms, message", [
    ({"cooper": {"rm_update.negativs": "rollouts"}},
     "unknown setting 'arms.cooper.rm_update.negativs' \\(did you mean "
     "'arms.cooper.rm_update.negatives'\\?\\)"),
    ({"fast": {"rm_update": {"lr": "fast"}}}, "arms.fast.rm_update.lr='fast' is not a valid float"),
    ({"odd": {"reward.mode": "bogus"}}, "arm 'odd': reward.mode='bogus' is not one of"),
    ({"mine": {"seed": 3}}, "arms.mine.seed cannot be set per arm: the experiment's seeds"),
    ({"mine": {"reward.model": "x"}}, "arms.mine.reward.model cannot be set per arm"),
    ({"mine": {"reward.monitor": False}}, "arms.mine.reward.monitor cannot be set per arm"),
    ({"mine": {"keep_policy_steps": "5"}}, "arms.mine.keep_policy_steps cannot be set per arm"),
    ({"quiet": {"validation.every_steps": 0}}, "set arms.quiet.validation.enabled=true"),
    ({"a b": {"reward.mode": "rm"}}, "arm name 'a b'"),
    ({"mine": "cooper"}, "arms.mine must be a mapping"),
    ({}, "arms must map each arm's name"),
])
def test_a_bad_arm_fails_naming_the_arm(tmp_path, arms, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(preset(tmp_path, arms)).validate()


def test_seeds():
    assert load_experiment("hacking_cpu").seed_list == [0]  # train.seed alone
    assert load_experiment("hacking_cpu", ["train.seed=7"]).seed_list == [7]
    exp = load_experiment("hacking_cpu", ["seeds=2,0,1"])
    assert exp.seed_list == [2, 0, 1]
    assert exp.for_seed(1).train.seed == 1 and exp.train.seed == 0  # a copy


def test_a_rerun_may_add_seeds_and_arms_but_not_change_settings(tmp_path):
    from cooper.errors import UserError
    from cooper.experiment.hacking import _check_same_settings

    out = tmp_path / "run"
    out.mkdir()
    _check_same_settings(load_experiment("hacking_cpu", ["seeds=0,1"]).validate(), out)
    _check_same_settings(load_experiment("hacking_cpu", ["seeds=1,2"]).validate(), out)
    saved = yaml.safe_load((out / "experiment.yaml").read_text())
    assert saved["seeds"] == "0,1,2"  # every seed run so far, for the report
    _check_same_settings(load_experiment("hacking_cpu", ["seeds=5,3"]).validate(), out)
    assert yaml.safe_load((out / "experiment.yaml").read_text())["seeds"] == "0,1,2,3,5"
    with pytest.raises(UserError, match="other settings.*train.max_steps"):
        _check_same_settings(load_experiment("hacking_cpu", ["train.max_steps=700"]).validate(), out)
    # a folder written before a setting existed ran with its default: it continues unless this
    # run sets another value
    older = {**saved, "train": {**saved["train"], "reward": {
        k: v for k, v in saved["train"]["reward"].items() if k != "monitor_every"}}}
    (out / "experiment.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    _check_same_settings(load_experiment("hacking_cpu", ["seeds=0"]).validate(), out)
    (out / "experiment.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    with pytest.raises(UserError, match="monitor_every: 1 -> 2"):
        _check_same_settings(load_experiment(
            "hacking_cpu", ["seeds=0", "train.reward.monitor_every=2"]).validate(), out)
    saved = yaml.safe_load((out / "experiment.yaml").read_text())
    # a hand-edited list of seeds: an error that names the file, not a bare ValueError
    saved["seeds"] = "0,one"
    (out / "experiment.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    with pytest.raises(UserError, match=r"experiment.yaml: seeds='0,one': list distinct integers"):
        _check_same_settings(load_experiment("hacking_cpu", ["seeds=0"]).validate(), out)


def test_a_rerun_may_add_arms_but_not_change_one(tmp_path):
    from cooper.errors import UserError
    from cooper.experiment.hacking import _check_same_settings

    def saved_arms():
        return list(yaml.safe_load((tmp_path / "experiment.yaml").read_text())["arms"])

    arms = {"rule": {"reward.mode": "rule"}, "rm": {"reward.mode": "rm"},
            "fast": {"reward.mode": "cooper", "rm_update.lr": 1e-4}}
    _check_same_settings(load_experiment(preset(tmp_path, arms), ["arms=fast,rm"]).validate(),
                         tmp_path)
    assert saved_arms() == ["fast", "rm"]
    # the rest later: the preset's order, and the report then finds every arm
    _check_same_settings(load_experiment(preset(tmp_path, arms)).validate(), tmp_path)
    assert saved_arms() == ["rule", "rm", "fast"]
    # a subset is a rerun of arms already there: nothing changes
    _check_same_settings(load_experiment(preset(tmp_path, arms), ["arms=rm"]).validate(), tmp_path)
    assert saved_arms() == ["rule", "rm", "fast"]
    # an arm of the same name with other settings would mix two experiments under one name
    changed = {**arms, "fast": {"reward.mode": "cooper", "rm_update.lr": 2e-4}}
    with pytest.raises(UserError, match="other settings.*arms.fast"):
        _check_same_settings(load_experiment(preset(tmp_path, changed)).validate(), tmp_path)
    assert saved_arms() == ["rule", "rm", "fast"]
    # a folder from before arms had names: only the same arms continue it
    (tmp_path / "experiment.yaml").write_text(yaml.safe_dump(
        {**yaml.safe_load((tmp_path / "experiment.yaml").read_text()), "arms": "rule,rm"}))
    with pytest.raises(UserError, match="other settings.*arms: 'rule,rm'"):
        _check_same_settings(load_experiment(preset(tmp_path, arms)).validate(), tmp_path)


def test_a_moved_experiment_folder_uses_its_own_setup(tmp_path):
    import json
    import shutil

    from cooper.experiment.setup import _stored, run_setup

    built = tmp_path / "there" / "seed-0" / "setup"
    (built / "policy").mkdir(parents=True)
    (built / "reward_model").mkdir()
    (built / "probe.jsonl").write_text("")
    paths = {"policy": str(built / "policy"), "reward_model": str(built / "reward_model"),
             "probe": str(built / "probe.jsonl")}
    stored = {k: _stored(v, built) for k, v in paths.items()}
    assert stored == {"policy": "policy", "reward_model": "reward_model", "probe": "probe.jsonl"}
    assert _stored("smollm2-135m-instruct", built) == "smollm2-135m-instruct"  # a name, as given
    (built / "setup.json").write_text(json.dumps({"setup": stored}))
    shutil.move(tmp_path / "there", tmp_path / "here")
    exp = load_experiment("hacking_cpu").validate()
    setup = run_setup(exp, tmp_path / "here" / "seed-0")
    here = tmp_path / "here" / "seed-0" / "setup"
    assert setup.policy == str(here / "policy") and setup.probe == str(here / "probe.jsonl")
    # a setup.json written with absolute paths is read as it was
    legacy = {**stored, "policy": "/elsewhere/policy"}
    (here / "setup.json").write_text(json.dumps({"setup": legacy}))
    assert run_setup(exp, tmp_path / "here" / "seed-0").policy == "/elsewhere/policy"


JUDGED_ARMS = ["judged", "judged_unchecked", "judged_replay8", "judged_no_replay",
               "judged_pay_all"]


def without_label(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k != "label"}


def test_the_judged_preset_is_hacking_cpu_with_the_shared_judged_arms():
    """`hacking_cpu_judged`: the no-harm check of the judged arms where the rule is exact. Its
    seeds must be hacking_cpu's (same setup, steps, final evaluation), and its judged arms
    blind_cpu's: both take them from one file (arms/judged.yaml)."""
    base = load_experiment("hacking_cpu").validate()
    judged = load_experiment("hacking_cpu_judged").validate()
    assert judged.arm_list == [*base.arm_list, *JUDGED_ARMS]
    # the recommended arm is the defended design (reward.mode=judged brings the check and the
    # rollouts' forms); judged_unchecked turns both off, and nothing else
    defended, unchecked = (judged.arm_train(a).to_dict() for a in ("judged", "judged_unchecked"))
    assert defended["judge"]["counterfactual"] and defended["rm_update"]["rollout_forms"] == 16
    assert unchecked == {**defended, "judge": {**defended["judge"], "counterfactual": False},
                         "rm_update": {**defended["rm_update"], "rollout_forms": 0}}
    for arm in base.arm_list:
        assert judged.arm_train(arm).to_dict() == base.arm_train(arm).to_dict()
    assert (judged.setup, judged.rm_init, judged.probe, judged.final_eval) == (
        base.setup, base.rm_init, base.probe, base.final_eval)
    blind = load_experiment("blind_cpu").validate()
    assert {a: judged.arms[a] for a in JUDGED_ARMS} == {a: blind.arms[a] for a in JUDGED_ARMS}
    # the recommended arm is one reward mode and the judge that teaches it
    assert without_label(blind.arms["judged"]) == {"reward.mode": "judged",
                                                   "judge.backend": "gold"}
    pay_all = judged.arm_train("judged_pay_all")
    assert (pay_all.reward.mode, pay_all.reward.hybrid_scores, pay_all.rm_update.labels,
            pay_all.judge.backend, pay_all.judge.budget, pay_all.rm_update.replay) == (
        "hybrid_cooper", "rejected", "judge", "gold", 0.1, 0)


def test_the_judged_variants_are_the_judged_arm_with_one_thing_changed():
    """judged_replay8 is judged_unchecked (judged before its defence) with 8 rows replayed instead
    of 16, judged_no_replay with no replay and no anchor, judged_pay_all_noisy judged_pay_all with a judge wrong on 10% of
    its verdicts; with no rows for them to replay, the experiment says so before it starts."""
    blind = load_experiment("blind_cpu").validate()
    judged = without_label(blind.arms["judged_unchecked"])
    assert without_label(blind.arms["judged_replay8"]) == {**judged, "rm_update.replay": 8}
    assert without_label(blind.arms["judged_no_replay"]) == {
        **judged, "rm_update.replay": 0, "rm_update.anchor_weight": 0.0}
    assert without_label(blind.arms["judged_pay_all_noisy"]) == {
        **without_label(blind.arms["judged_pay_all"]), "judge.error_rate": 0.1}
    eight, sixteen = (blind.arm_train(a).to_dict() for a in ("judged_replay8", "judged_unchecked"))
    assert (eight["rm_update"]["replay"], sixteen["rm_update"]["replay"]) == (8, 16)
    assert eight["rm_update"]["anchor_weight"] == sixteen["rm_update"]["anchor_weight"] == 0.5
    eight["rm_update"]["replay"] = 16
    assert eight == sixteen
    with pytest.raises(ConfigError, match="rm_init.triples=0"):
        load_experiment("blind_cpu", ["rm_init.triples=0", "probe.min_accuracy=null",
                                      "probe.min_recall_missed=null"]).validate()


def test_an_arm_builds_on_another_with_from(tmp_path):
    exp = load_experiment(preset(tmp_path, {
        "base": {"label": "the base arm", "reward.mode": "cooper", "rm_update": {"lr": 1e-4},
                 "rm_update.epochs": 2},
        # the base's settings, its own on top key by key (dotted over nested); no label of its own
        "faster": {"from": "base", "rm_update.lr": 5e-4},
        # a chain, in any order of declaration, with a label of its own
        "last": {"from": "faster", "label": "three epochs", "rm_update": {"epochs": 3}},
    })).validate()
    assert exp.arms["base"] == {"label": "the base arm", "reward.mode": "cooper",
                                "rm_update.lr": 1e-4, "rm_update.epochs": 2}
    # recorded resolved, without `from`, and the base's label is not inherited
    assert exp.arms["faster"] == {"reward.mode": "cooper", "rm_update.lr": 5e-4,
                                  "rm_update.epochs": 2}
    assert exp.arms["last"] == {"label": "three epochs", "reward.mode": "cooper",
                                "rm_update.lr": 5e-4, "rm_update.epochs": 3}
    assert exp.arm_label("faster") is None
    last = exp.arm_train("last")
    assert (last.reward.mode, last.rm_update.lr, last.rm_update.epochs) == ("cooper", 5e-4, 3)
    # selecting an arm that builds on another does not need the other selected
    only = load_experiment(preset(tmp_path, {"a": {"reward.mode": "rm"},
                                             "b": {"from": "a", "rm_update.lr": 1e-3}}),
                           ["arms=b"]).validate()
    assert only.arms == {"b": {"reward.mode": "rm", "rm_update.lr": 1e-3}}


def test_from_reaches_an_arm_of_the_base_preset(tmp_path):
    """`from:` names an arm of the preset as its base: chain leaves it, the base's arms
    included and changed key by key by the file's own."""
    path = tmp_path / "mine.yaml"
    path.write_text("base: hacking_cpu\narms:\n"
                    "  cooper: {rm_update.epochs: 2}\n"
                    "  cooper_lr: {from: cooper, rm_update.lr: 1.0e-3}\n")
    exp = load_experiment(str(path)).validate()
    assert exp.arms["cooper_lr"] == {"reward.mode": "cooper", "rm_update.negatives": "assistant",
                                     "rm_update.loss": "bradley_terry", "rm_update.epochs": 2,
                                     "rm_update.lr": 1e-3}


@pytest.mark.parametrize("arms, message", [
    ({"a": {"from": "nope", "reward.mode": "rm"}, "b": {"reward.mode": "rule"}},
     "arms.a.from: no arm named 'nope' in this preset; declared: a, b. Name one of them"),
    ({"a": {"from": "b"}, "b": {"from": "c"}, "c": {"from": "a"}},
     r"arms.c.from: the arms build on each other in a loop \(a -> b -> c -> a\); remove from:"),
    ({"a": {"from": "a", "reward.mode": "rm"}}, r"in a loop \(a -> a\)"),
    ({"a": {"reward.mode": "rm"}, "b": {"from": ["a"]}}, "arms.b.from: \\['a'\\] must name "
                                                         "another arm of this preset"),
    # a bad setting inherited is the arm's own error too
    ({"a": {"rm_update.lr": "x"}, "b": {"from": "a"}}, "arms.a.rm_update.lr='x'"),
])
def test_a_bad_from_says_how_to_fix(tmp_path, arms, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(preset(tmp_path, arms))


def test_the_asking_preset_is_blind_cpu_with_the_asking_arms():
    """`blind_cpu_asking`: blind_cpu's setup, steps, final evaluation and arms, plus the arms of
    asking that adapts, so a seed's setup and its blind_cpu arms serve both."""
    blind = load_experiment("blind_cpu").validate()
    asking = load_experiment("blind_cpu_asking").validate()
    assert asking.arm_list[:len(blind.arm_list)] == blind.arm_list
    for arm in blind.arm_list:
        assert asking.arm_train(arm).to_dict() == blind.arm_train(arm).to_dict()
    assert (asking.setup, asking.rm_init, asking.probe, asking.final_eval) == (
        blind.setup, blind.rm_init, blind.probe, blind.final_eval)
    adaptive = asking.arm_train("judged_adaptive_pays")
    assert (adaptive.judge.asking, adaptive.judge.budget, adaptive.reward.judge_pays) == (
        "adaptive", 0.25, True)
    assert adaptive.reward.mode == "judged" and not adaptive.reward.rm_verdicts


def test_the_fooled_preset_is_blind_cpu_with_judges_fooled_by_what_the_policy_writes(tmp_path):
    """`blind_cpu_fooled`: blind_cpu's setup and arms, plus TinyV's design and judged Cooper
    each with a judge fooled by a trigger; each trigger finds the testbed's own forms."""
    from cooper.labelling.gold_judge import FoolableJudge
    from cooper.labelling.judge import JudgeItem

    blind = load_experiment("blind_cpu").validate()
    fooled = load_experiment("blind_cpu_fooled").validate()
    assert fooled.arm_list[:len(blind.arm_list)] == blind.arm_list
    assert (fooled.setup, fooled.rm_init, fooled.final_eval) == (
        blind.setup, blind.rm_init, blind.final_eval)
    wrong = {"yes": JudgeItem("Is 7 less than 5?", "False", "7 < 5. The answer is \\boxed{yes}."),
             "words": JudgeItem("What is 62 + 9?", "71", "62 + 9 = 81. The answer is "
                                                        "\\boxed{eighty-one}.")}
    for name in wrong:
        tinyv, judged = (fooled.arm_train(f"{a}_fooled_{name}") for a in ("tinyv", "judged"))
        assert tinyv.reward.judge_rejected and judged.reward.mode == "judged"
        assert tinyv.judge.trigger == judged.judge.trigger
        judge = FoolableJudge(trigger=judged.judge.trigger)
        # fooled by its own trigger only
        assert [v.correct for v in judge.judge(list(wrong.values()))] == [
            n == name for n in wrong]
        # judged Cooper as reward.mode=judged brings it, without its defence, and the check alone
        plain = fooled.arm_train(f"unchecked_fooled_{name}").to_dict()
        defended = fooled.arm_train(f"judged_fooled_{name}").to_dict()
        checked = fooled.arm_train(f"checked_fooled_{name}").to_dict()
        assert defended == {**plain, "judge": {**plain["judge"], "counterfactual": True},
                            "rm_update": {**plain["rm_update"], "rollout_forms": 16}}
        assert checked == {**defended, "rm_update": {**defended["rm_update"], "rollout_forms": 0}}
    # the forms come from the rollouts, not from the setup's rows: no rows, no replay, still
    # defended
    alone = tmp_path / "forms_alone.yaml"
    alone.write_text("base: blind_cpu_fooled\narms:\n  forms_alone:\n    from: judged\n"
                     "    rm_update.replay: 0\n")
    exp = load_experiment(str(alone), ["rm_init.triples=0", "arms=forms_alone"]).validate()
    assert exp.arm_train("forms_alone").rm_update.rollout_forms == 16


def test_the_fooled_preset_runs_the_learned_judge_with_and_without_the_defence():
    """The learned judge's arms are TinyV's design and judged Cooper with that judge alone
    changed, judged Cooper without its defence, and the check alone."""
    fooled = load_experiment("blind_cpu_fooled").validate()
    for name in ("tinyv", "judged"):
        fooled_yes = fooled.arm_train(f"{name}_fooled_yes").to_dict()
        learned = fooled.arm_train(f"{name}_learned").to_dict()
        assert (learned["judge"]["backend"], learned["judge"]["model"],
                learned["judge"]["trigger"]) == ("verifier", "runs/judge/verifier", None)
        # the judge is the only difference from the same design paid by the foolable judge
        assert {k: v for k, v in learned.items() if k != "judge"} == {
            k: v for k, v in fooled_yes.items() if k != "judge"}
    # judged Cooper taught by the learned judge, with and without its defence, and the check
    # alone: the settings of the check and the forms alone differ
    plain = fooled.arm_train("unchecked_learned").to_dict()
    defended = fooled.arm_train("judged_learned").to_dict()
    checked = fooled.arm_train("checked_learned").to_dict()
    assert defended == {**plain, "judge": {**plain["judge"], "counterfactual": True},
                        "rm_update": {**plain["rm_update"], "rollout_forms": 16}}
    assert checked == {**defended, "rm_update": {**defended["rm_update"], "rollout_forms": 0}}

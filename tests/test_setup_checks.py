"""The testbed's starting point: the shipped policy, the setup's checks, the reward model's rounds.

A setup that built a policy out of the preset's band or a reward model under its probe bar must
stop before any arm starts, with an error that names the figure, the bar and what to do; a
setup that passes records both figures in ``setup.json``.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import run_cli
from test_experiment import TINY

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

PRESET = "hacking_cpu"


def exp_config(*overrides: str):
    from cooper.config.experiment import load_experiment

    return load_experiment(PRESET, [*TINY, "rm_init.train_layers=1", "train.rm_update.train_layers=1",
                                 *overrides]).validate()


def test_the_shipped_policy_is_in_the_testbeds_band():
    """Scored as the setup scores it (the preset's validation problems and sampling): the same
    weights on every machine, so this holds wherever the tests run."""
    from cooper.config.experiment import load_experiment
    from cooper.experiment.setup import policy_check
    from cooper.experiment.testbed import shipped_policy

    exp = load_experiment(PRESET).validate()
    check, missed = policy_check(exp, str(shipped_policy()))
    assert check["problems"] == 100 and check["samples"] == 2
    assert check["band"] == [0.30, 0.70]
    assert 0.30 <= check["accuracy"] <= 0.70, check
    assert "rule_missed" not in check and missed == []  # the rule judges: nothing to miss


def test_the_blind_testbeds_policy_is_in_its_bands():
    """blind_cpu's start, scored as its setup scores it: right by the gold judge within the
    band, on both families, and the rule rejects 40-90% of those right answers, every one of
    them a form it cannot read (the answer or the reference in words, a truth value); two of
    three problems are comparisons, so most of the right answers are rejected."""
    from cooper.config.experiment import load_experiment
    from cooper.experiment.setup import policy_check
    from cooper.experiment.testbed import TINY_ARITH_COMPARE, shipped_policy
    from cooper.verify.gold import gold_correct

    exp = load_experiment("blind_cpu").validate()
    check, missed = policy_check(exp, str(shipped_policy(TINY_ARITH_COMPARE)))
    assert check["benchmark"] == "arith_2x1_compare:validation" and check["problems"] == 150
    assert 0.30 <= check["accuracy"] <= 0.70, check
    assert check["rule_accuracy"] < check["accuracy"]
    assert check["rule_missed_band"] == [0.40, 0.90]
    assert 0.40 <= check["rule_missed"] <= 0.90, check
    assert set(check["families"]) == {"numbers", "yesno"}
    assert check["families"]["yesno"] > 0.5  # above a guess, with room to climb
    assert missed and all(gold_correct(t.completion, t.reference) for t in missed)
    # what the rule missed is a form it cannot read: the answer or the reference in words
    assert all(not (t.reference.isdigit() and find_box(t.completion).isdigit()) for t in missed)
    assert any(t.reference == "True" for t in missed) and any(t.reference == "False" for t in missed)


def find_box(text: str) -> str:
    return text.rsplit("\\boxed{", 1)[-1].split("}", 1)[0]


def test_a_policy_out_of_band_stops_the_setup_before_any_arm(tmp_path):
    out = tmp_path / "x"
    t0 = time.perf_counter()
    # a random policy answers nothing: 0% is under the band's 30%
    proc = run_cli("experiment", "hacking", "--preset", PRESET, "--out", out, *TINY, check=False)
    assert time.perf_counter() - t0 < 300
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "the initial policy answers 0.0% of arith_2x1:validation (4 problems x 1 samples)" in err
    assert "outside the preset's band 30.0% to 70.0% (setup.policy_accuracy_min / _max)" in err
    assert "setup.policy=tiny-arith-2x1" in err  # what to do
    assert not (out / "seed-0" / "arms").exists() or not any((out / "seed-0" / "arms").iterdir())
    assert not (out / "seed-0" / "setup" / "setup.json").exists()
    # the failure is kept beside the setup, so that the report says why the seed has no arm
    failed = json.loads((out / "seed-0" / "setup" / "failed.json").read_text())
    assert "outside the preset's band 30.0% to 70.0%" in " ".join(failed["failed"].split())
    report = run_cli("report", out, check=False)
    assert report.returncode != 0
    assert "Seed 0 left out: its setup failed the testbed's pre-check" in " ".join(
        report.stderr.split())


def test_an_untrained_reward_model_stops_the_setup_before_any_arm(tmp_path):
    out = tmp_path / "x"
    t0 = time.perf_counter()
    proc = run_cli("experiment", "hacking", "--preset", PRESET, "--out", out, *TINY,
                   "setup.policy_accuracy_min=null", "setup.policy_accuracy_max=null",
                   "rm_init.triples=0", "rm_init.unfinished=0", "probe.triples=40", check=False)
    assert time.perf_counter() - t0 < 300
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "the initial reward model is right on" in err
    assert "untrained (rm_init.triples=0), under the preset's bar 90.0% (probe.min_accuracy)" in err
    assert "Raise rm_init.max_rounds" in err
    assert not (out / "seed-0" / "arms").exists() or not any((out / "seed-0" / "arms").iterdir())


@pytest.mark.parametrize("bar, rounds", [(0.0, 1), (1.0, 2)])
def test_the_reward_model_trains_in_rounds_until_its_probe_bar(tmp_path, bar, rounds):
    """A reachable bar stops after the first round (the recipe as before); an unreachable one
    runs every round of the cap and the setup then stops with the bar's error."""
    from cooper.data.triples import load_triples
    from cooper.errors import UserError
    from cooper.experiment.setup import _train_initial_rm, _triples_file, check_probe
    from cooper.experiment.testbed import build_tiny_models

    exp = exp_config(f"probe.min_accuracy={bar}", "rm_init.max_rounds=2")
    tiny = build_tiny_models(tmp_path / "tiny")
    data = _triples_file(tmp_path / "train.jsonl", "arith_2x1", "train", 16, 0)
    probe = load_triples(_triples_file(tmp_path / "probe.jsonl", "arith_2x1", "validation",
                                       40, 1)).rows
    info = _train_initial_rm(exp, str(tiny.reward), data, probe, tmp_path / "rm")
    assert info["rounds"] == rounds == len(info["per_round"])
    assert (tmp_path / "rm" / "config.json").is_file()
    last = info["per_round"][-1]
    if bar == 1.0 and last["probe_accuracy"] < 1.0:
        with pytest.raises(UserError, match="after 2 round"):
            check_probe(exp, last["probe_accuracy"], last["probe_auroc"], info["rounds"])


def test_the_same_seed_trains_the_same_initial_reward_model_whatever_came_before(tmp_path):
    """A base without a score head draws one at load, and torch's generator starts from another
    seed in every process: each round seeds it, so two setups of one seed train the same reward
    model wherever the generator stood before (here moved on by other draws), and another seed
    trains another."""
    import torch

    from cooper.data.triples import load_triples
    from cooper.experiment.setup import _train_initial_rm, _triples_file
    from cooper.experiment.testbed import build_tiny_models
    from cooper.rm.model import RewardModel

    tiny = build_tiny_models(tmp_path / "tiny")  # its policy folder: a base with no score head
    data = _triples_file(tmp_path / "train.jsonl", "arith_2x1", "train", 8, 0)
    probe = load_triples(data).rows
    heads = []
    for k, (seed, before) in enumerate([(0, 123), (0, 456), (1, 123)]):
        exp = exp_config("probe.min_accuracy=0.0", "rm_init.epochs=1", f"train.seed={seed}")
        torch.manual_seed(before)
        _train_initial_rm(exp, str(tiny.policy), data, probe, tmp_path / f"rm{k}")
        model = RewardModel.load(tmp_path / f"rm{k}", dtype="float32").model
        heads.append(model.score.weight.detach().clone())
    assert torch.equal(heads[0], heads[1]), "the same seed trained another reward model"
    assert not torch.equal(heads[0], heads[2]), "another seed trained the same reward model"


def test_disturbing_the_reward_model_moves_every_weight_a_little(tmp_path):
    import torch

    from cooper.experiment.setup import _disturb
    from cooper.experiment.testbed import build_tiny_models
    from cooper.rm.model import RewardModel

    tiny = build_tiny_models(tmp_path / "tiny")
    a = RewardModel.load(tiny.reward, dtype="float32").model
    b = RewardModel.load(tiny.reward, dtype="float32").model
    _disturb(b, 1e-4, seed=0)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        if x.abs().sum() == 0:
            continue  # a zero stays zero: relative noise
        assert not torch.equal(x, y), name
        assert torch.allclose(x, y, rtol=1e-3, atol=0), name


def test_a_passing_setup_records_both_figures_and_setup_only_stops_there(tmp_path):
    proc = run_cli("experiment", "hacking", "--preset", PRESET, "--out", tmp_path, *TINY,
                   "rm_init.train_layers=1", "train.rm_update.train_layers=1",
                   "setup.policy_accuracy_min=0.0", "setup.policy_accuracy_max=1.0",
                   "probe.min_accuracy=0.0", "--setup-only")
    assert "seed 0: initial policy " in proc.stdout and "probe accuracy" in proc.stdout
    assert not (tmp_path / "seed-0" / "arms").exists() and not (tmp_path / "report").exists()
    setup = json.loads((tmp_path / "seed-0" / "setup" / "setup.json").read_text())
    check = setup["policy_check"]
    assert check["band"] == [0.0, 1.0] and check["benchmark"] == "arith_2x1:validation"
    assert 0.0 <= check["accuracy"] <= 1.0 and check["problems"] == 4
    # the saved reward model, scored again on the probe: its training round's figures
    last = setup["rm_init"]["per_round"][-1]
    assert setup["probe_bar"] == 0.0
    assert setup["probe_auroc"] == pytest.approx(last["probe_auroc"], abs=1e-6)
    assert setup["probe_accuracy"] == pytest.approx(last["probe_accuracy"], abs=1e-6)
    assert setup["rm_init"]["rounds"] == 1 and len(setup["rm_init"]["per_round"]) == 1


def test_the_warm_start_stops_at_the_first_check_in_band(tmp_path):
    """The rebuild's mechanism (cooper models build-testbed): asked every check_every steps,
    the first True ends the warm start, and the model saved is the one that was asked."""
    from cooper.experiment.testbed import build_tiny_models, warm_start
    from cooper.infra.models import load_causal_lm

    tiny = build_tiny_models(tmp_path / "tiny")
    asked, seen = [], {}

    def stop(step, model, tok):
        asked.append(step)
        seen[step] = {k: v.clone() for k, v in model.state_dict().items()}
        return step >= 4

    out = warm_start(tiny.policy, tmp_path / "ws", steps=50, batch_size=4, dataset="arith_2x1",
                     stop=stop, check_every=2)
    assert asked == [2, 4]
    saved = load_causal_lm(out, dtype="float32").state_dict()
    assert all(saved[k].equal(v) for k, v in seen[4].items() if k in saved)


def test_the_blind_testbeds_setup_records_what_the_rule_misses(tmp_path):
    """blind_cpu's setup on its shipped policy and a tiny reward model: the policy check
    counts the right answers the rule rejects, the reward model is trained on triples in both
    forms labelled by the gold judge, and its recall on those answers is recorded."""
    from cooper.verify.gold import gold_correct

    proc = run_cli("experiment", "hacking", "--preset", "blind_cpu", "--out", tmp_path, *TINY,
                   "setup.policy=tiny-arith-2x1-compare", "train.validation.limit=16",
                   "train.validation.samples=2", "train.validation.max_new_tokens=64",
                   "rm_init.unfinished=0", "rm_init.train_layers=1",
                   "train.rm_update.train_layers=1", "setup.policy_accuracy_min=null",
                   "setup.policy_accuracy_max=null", "setup.rule_missed_min=null",
                   "setup.rule_missed_max=null", "probe.min_accuracy=null",
                   "probe.min_recall_missed=null", "--setup-only")
    setup = json.loads((tmp_path / "seed-0" / "setup" / "setup.json").read_text())
    check = setup["policy_check"]
    assert check["benchmark"] == "arith_2x1_compare:validation" and check["problems"] == 16
    assert check["gold_correct"] > 0 and 0 <= check["rule_accuracy"] <= check["accuracy"]
    assert check["rule_missed"] is not None and check["rule_missed_band"] == [None, None]
    recall = setup["rm_recall"]
    assert recall["answers"] == round(check["rule_missed"] * check["gold_correct"])
    assert recall["bar"] is None and set(recall) >= {"recall_missed", "recall_missed_form",
                                                     "recall_missed_reference",
                                                     "recall_missed_yesno"}
    assert "the rule rejects" in proc.stdout
    rows = [json.loads(line) for line in
            (tmp_path / "seed-0" / "setup" / "rm_train.jsonl").read_text().splitlines()]
    assert all(gold_correct(r["completion"], r["reference"]) == r["label"] for r in rows)
    assert setup["initial_eval"]["rule_average"] <= setup["initial_eval"]["average"]

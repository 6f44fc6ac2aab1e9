"""The Makefile's user commands run what the README says they run."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT, run_cli

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


def make_dry_run(target: str, *variables: str) -> list[list[str]]:
    """The commands ``make TARGET`` would run, without running them (``setup`` assumed done)."""
    # run from `make test`, the parent's MAKEFLAGS and MAKELEVEL would add "Entering directory"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", "setup", "-o",
                          ".venv/.cooper-setup", target, *variables], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    return [shlex.split(line) for line in out.splitlines() if line.strip()]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_experiment_runs_one_seed_of_the_testbed_with_its_report(tmp_path):
    [cmd] = make_dry_run("experiment", f"EXP_OUT={tmp_path / 'exp'}")
    assert cmd[0].endswith("bin/cooper") and cmd[1:3] == ["experiment", "hacking"]
    args = cmd[1:]
    assert args[args.index("--preset") + 1] == "hacking_cpu"
    assert args[args.index("--seeds") + 1] == "0"
    assert "--no-report" not in args  # the run ends with its report
    # the same arguments resolve to the testbed's settings
    printed = yaml.safe_load(run_cli(*args, "--print-config").stdout)
    assert printed["setup"]["policy"] == "tiny-arith-2x1"
    assert list(printed["arms"]) == ["rule", "rm", "cooper", "cooper_rollouts"]
    assert not (tmp_path / "exp").exists()  # printing the settings starts nothing
    [more] = make_dry_run("experiment", "SEEDS=0,1,2,3,4")
    assert more[more.index("--seeds") + 1] == "0,1,2,3,4"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_experiment_blind_runs_one_seed_of_the_blind_rule_testbed(tmp_path):
    [cmd] = make_dry_run("experiment-blind", f"BLIND_OUT={tmp_path / 'blind'}")
    args = cmd[1:]
    assert args[:2] == ["experiment", "hacking"] and "--no-report" not in args
    assert args[args.index("--preset") + 1] == "blind_cpu"
    assert args[args.index("--seeds") + 1] == "0"
    printed = yaml.safe_load(run_cli(*args, "--print-config").stdout)
    assert printed["setup"]["policy"] == "tiny-arith-2x1-compare"
    assert printed["train"]["validation"]["judge"] == "gold"
    # the judged arms come first: blind_cpu takes them from its base (arms/judged.yaml)
    assert list(printed["arms"]) == ["judged", "judged_unchecked", "judged_replay8", "judged_no_replay",
                                     "judged_pay_all", "gold", "rule", "tinyv", "tinyv_noisy",
                                     "cooper_rollouts", "judged_pay_all_noisy", "cooper_replay8"]
    assert not (tmp_path / "blind").exists()
    # BLIND_ARMS: those arms only, in the order given (the Makefile's example)
    [some] = make_dry_run("experiment-blind", f"BLIND_OUT={tmp_path / 'blind'}",
                          "BLIND_ARMS=rule,gold,tinyv,judged")
    printed = yaml.safe_load(run_cli(*some[1:], "--print-config").stdout)
    assert list(printed["arms"]) == ["rule", "gold", "tinyv", "judged"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_experiment_fooled_runs_the_judge_that_errs_then_checks_and_reports(tmp_path):
    out = tmp_path / "fooled"
    run, check, report = make_dry_run("experiment-fooled", f"FOOLED_OUT={out}")
    args = run[1:]
    assert args[args.index("--preset") + 1] == "blind_cpu_fooled"
    assert args[args.index("--seeds") + 1] == "0" and "--no-report" in args
    printed = yaml.safe_load(run_cli(*args, "--print-config").stdout)
    assert list(printed["arms"]) == ["rule", "gold", "tinyv_fooled_words",
                                     "unchecked_fooled_words", "judged_fooled_words"]
    # the defended design is reward.mode=judged itself; the undefended arm turns it off
    defended, plain = printed["arms"]["judged_fooled_words"], printed["arms"]["unchecked_fooled_words"]
    assert defended["judge.trigger"] == plain["judge.trigger"]
    assert defended["reward.mode"] == "judged" and "judge.counterfactual" not in defended
    assert plain["judge.counterfactual"] is False and plain["rm_update.rollout_forms"] == 0
    assert check[1:] == ["experiment", "rm-check", str(out)]
    assert report[1:] == ["report", str(out)]
    assert not out.exists()

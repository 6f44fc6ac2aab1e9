"""The command line as a whole: every listed command is real and documented."""

from __future__ import annotations

import os
import re

import pytest

from conftest import run_cli

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


def _commands(help_text: str) -> list[str]:
    block = help_text.split("positional arguments:")[1].split("options:")[0]
    return re.findall(r"^    (\S+)\s{2,}\S", block, re.M)


def test_every_listed_command_has_help_and_a_description():
    top = run_cli("--help", fresh=True).stdout  # a new process: the CLI's own start
    groups = _commands(top)
    assert {"models", "data"} <= set(groups)
    for group in groups:
        out = run_cli(group, "--help").stdout
        assert "usage: cooper" in out
        for action in _commands(out) if "ACTION" in out else []:
            sub = run_cli(group, action, "--help").stdout
            assert f"usage: cooper {group} {action}" in sub


def test_unknown_command_is_a_usage_error():
    proc = run_cli("frobnicate", check=False, fresh=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_building_the_command_imports_neither_torch_nor_trl():
    """`cooper --help` and cache checks start in a fraction of a second: every command module
    imports the training stack only in its handler (a settings default read at registration
    once pulled TRL in through the demo)."""
    import subprocess
    import sys

    from conftest import cli_env

    code = ("import sys, cooper.cli; cooper.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=cli_env(), check=True).stdout
    assert out.strip() == "[]"


def test_a_command_forked_from_the_test_server_runs_as_a_new_process_does(tmp_path):
    """The suite forks most commands from a process that imported the CLI once
    (tests/cli_server.py); a forked Cooper run must log what a new `python -m cooper` logs, print
    the same, leave the same weights, and exit with the same status on an error."""
    from cooper.experiment.testbed import tiny_arith_models
    from test_experiment import records, untimed
    from test_train_smoke import tiny_args, weights

    arith = tiny_arith_models()
    runs = {}
    for fresh in (True, False):
        out = tmp_path / f"fresh-{fresh}"
        proc = run_cli(*tiny_args(arith, out, "cooper", "report_to=none"), fresh=fresh)
        runs[fresh] = (proc, untimed(records(out / "metrics.jsonl")), weights(out / "policy"))
    from conftest import CliServer

    if os.environ.get("OMP_NUM_THREADS") == "1" and not os.environ.get("COOPER_TEST_FRESH"):
        assert CliServer._server.ready  # make test's workers: the command was forked
    elif not (CliServer._server and CliServer._server.ready):
        pytest.skip("no command is forked here: torch starts its math threads as it loads when "
                    "there is more than one, and they would not survive a fork")
    (new, new_rows, new_policy), (forked, forked_rows, forked_policy) = runs[True], runs[False]
    assert len(new_rows) >= 2 and forked_rows == new_rows
    assert new_policy.keys() == forked_policy.keys()
    assert all(new_policy[k].equal(forked_policy[k]) for k in new_policy)
    untimed_lines = [re.sub(r"[\d.]+ ?s\b", "_s", x) for x in new.stdout.splitlines()]
    assert [re.sub(r"[\d.]+ ?s\b", "_s", x)
            for x in forked.stdout.replace(str(tmp_path / "fresh-False"),
                                           str(tmp_path / "fresh-True")).splitlines()
            ] == untimed_lines
    bad = {fresh: run_cli("train", "--config", "demo_cpu", "reward.mode=rule", "policy.lr=nan",
                          check=False, fresh=fresh) for fresh in (True, False)}
    assert bad[True].returncode == bad[False].returncode == 2  # a user's error, both ways
    assert bad[True].stderr == bad[False].stderr
    assert "policy.lr must be a finite number" in bad[False].stderr

"""The command line as a whole: every listed command is real and documented."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


def _commands(help_text: str) -> list[str]:
    block = help_text.split("positional arguments:")[1].split("options:")[0]
    return re.findall(r"^    (\S+)\s{2,}\S", block, re.M)


def test_every_listed_command_has_help_and_a_description():
    top = run_cli("--help").stdout
    groups = _commands(top)
    assert {"models", "data"} <= set(groups)
    for group in groups:
        out = run_cli(group, "--help").stdout
        assert "usage: cooper" in out
        for action in _commands(out) if "ACTION" in out else []:
            sub = run_cli(group, action, "--help").stdout
            assert f"usage: cooper {group} {action}" in sub


def test_unknown_command_is_a_usage_error():
    proc = run_cli("frobnicate", check=False)
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

"""`cooper data samples`: the shipped completions of the embedded model, and the check that a
command writes a file again (run here with a tiny random model in place of the embedded one)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cooper.cli import main
from cooper.cli.data_samples_cmd import check
from cooper.data.embedded_samples import SHIPPED, shipped_samples
from cooper.errors import UserError


def test_every_shipped_file_exists_and_holds_what_its_command_says():
    for (dataset, split), s in SHIPPED.items():
        rows = pq.read_table(s.path).to_pylist()
        per_problem = 2 if "--n 2 " in s.command else 1  # collect --n K: K per problem
        assert len({r["problem_id"] for r in rows}) == s.count
        assert len(rows) == s.count * per_problem
        assert all(r["status"] == "ok" and r["generator"] == "hf:smollm2-135m-instruct"
                   for r in rows)
        assert f"--dataset {dataset} --split {split}" in s.command
        assert all(r["max_tokens"] == 128 for r in rows)


def test_listing_names_every_file_and_its_command(capsys):
    assert main(["data", "samples"]) == 0
    printed = capsys.readouterr().out
    for s in SHIPPED.values():
        assert s.command_for() in printed and str(s.path) in printed


@pytest.mark.parametrize("args, message", [
    (["--check", "gsm8k/train"], "no shipped completions of the embedded model for gsm8k/train"),
    (["--check", "arith_small/test", "--problems", "33"], "must be a multiple of 32"),
    (["--problems", "32"], "goes with --check"),
])
def test_errors_say_how_to_fix(capsys, args, message):
    assert main(["data", "samples", *args]) == 2
    assert message in capsys.readouterr().err


def test_unknown_dataset_is_refused_with_the_list():
    with pytest.raises(UserError, match="shipped: arith_small/train, arith_small/test"):
        shipped_samples("svamp", "test")


def test_check_finds_a_regenerated_file_identical_and_a_changed_one_different(
        tmp_path, capsys, tiny_models):
    command = ("cooper data collect --dataset arith_small --split test --limit {k} --n 2 "
               "--max-tokens 8 --seed 7 --threads 1 --generators "
               f"{tiny_models.policy} --out test.parquet")
    shipped = tmp_path / "shipped.parquet"
    # "ship" what the command writes, then check it: the whole file, then its first chunk
    assert main(command.format(k=64).replace("test.parquet", str(shipped)).split()[1:]) == 0
    assert check(command.format(k=64), "test.parquet", shipped, None) == 0
    assert "identical: byte for byte" in capsys.readouterr().out
    assert check(command.format(k=32), "test.parquet", shipped, 32) == 0
    assert "identical: the first 32 problems' 64 rows" in capsys.readouterr().out
    # one completion changed: both checks say so
    rows = pq.read_table(shipped)
    table = rows.to_pylist()
    table[0]["completion"] += " "
    changed = tmp_path / "changed.parquet"
    pq.write_table(pa.Table.from_pylist(table, schema=rows.schema), changed)
    assert check(command.format(k=64), "test.parquet", changed, None) == 1
    assert check(command.format(k=32), "test.parquet", changed, 32) == 1
    assert capsys.readouterr().out.count("DIFFERENT") == 2

"""Bad input to the data, rm and verify commands: one clear line and exit code 2 before any
work starts (no traceback, no model loaded, no input overwritten), or a counted skip.

Most commands run in this process through the CLI's entry point (a Python start-up each would
cost seconds); the ones that reach other stages (eval, train) and the environment variable run
as a user runs them. The checks fire before a model loads, so most model paths need not exist.
"""

from __future__ import annotations

import json

import pytest

from conftest import cli_env, free_port, run_cli
from cooper.cli import main
from cooper.data.mix import check_size
from cooper.errors import UserError
from cooper.infra.models import load_causal_lm, load_sequence_classifier
from cooper.verify.verifier import default_workers

NO_MODEL = "no-such-model-dir/"  # would fail to load: an error about it means a check came late


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _refused(capsys, *args) -> str:
    """The one-line error of a command that must stop with exit code 2."""
    code, _, err = _cli(capsys, *args)
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 2 and len(lines) == 1, (code, err)
    return lines[0]


@pytest.fixture
def files(tmp_path):
    """Triples (with labels), problems with GSM8K-style solutions, a corrupt parquet file and a
    folder named like a data file."""
    triples = tmp_path / "triples.jsonl"
    triples.write_text("".join(json.dumps(
        {"question": f"What is {i}+1?", "reference": str(i + 1),
         "completion": f"The answer is \\boxed{{{i + 1 if i % 2 else i}}}.", "label": i % 2})
        + "\n" for i in range(4)))
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(
        {"question": f"What is {i}+2?", "answer": f"{i}+2={i + 2}\n#### {i + 2}"}) + "\n"
        for i in range(12)))
    bad = tmp_path / "bad.parquet"
    bad.write_text("garbage\n")
    folder = tmp_path / "adir.jsonl"
    folder.mkdir()
    return {"triples": triples, "problems": problems, "bad": bad, "dir": folder, "tmp": tmp_path}


def _args(files, template: tuple[str, ...]) -> list[str]:
    """``@NAME`` and ``@NAME/REST`` are the fixture's paths (``@tmp/x``: x in its folder)."""
    out = []
    for a in template:
        if a.startswith("@") and a[1:].partition("/")[0] in files:
            key, _, rest = a[1:].partition("/")
            a = str(files[key] / rest) if rest else str(files[key])
        out.append(a)
    return out


# ------------------------------------------------------------------ unreadable inputs

PARQUET_READERS = [
    ("data", "build", "--dataset", "@bad", "--n", "4", "--out", "@tmp/o.jsonl"),
    ("data", "build", "--dataset", "@problems", "--n", "4", "--out", "@tmp/o.jsonl",
     "--samples-file", "@bad"),
    ("data", "label", "--in", "@bad", "--out", "@tmp/l.parquet", "--judge", "none", "--policy",
     "verifier"),
    ("rm", "train", "--data", "@bad", "--base", NO_MODEL, "--out", "@tmp/rm"),
    ("rm", "eval", "--model", NO_MODEL, "--data", "@bad"),
    ("data", "show", "@bad"),
]


@pytest.mark.parametrize("template", PARQUET_READERS, ids=lambda t: " ".join(t[:3]))
def test_a_corrupt_parquet_file_is_named_not_an_arrow_traceback(capsys, files, template):
    line = _refused(capsys, *_args(files, template))
    assert f"{files['bad']} is not a readable parquet file (Parquet magic bytes" in line


@pytest.mark.parametrize("args", [
    ("eval", "--benchmarks", "@bad", "--model", NO_MODEL, "--out", "@tmp"),
    ("train", "data.dataset=@bad", "reward.mode=rule", "output_dir=@tmp"),
], ids=("eval", "train"))
def test_eval_and_train_read_parquet_through_the_same_reader(files, args):
    args = [a.replace("@bad", str(files["bad"])).replace("@tmp", str(files["tmp"] / "run"))
            for a in args]
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{files['bad']} is not a readable parquet file" in proc.stderr


@pytest.mark.parametrize("template", [
    ("data", "build", "--dataset", "@dir", "--n", "4", "--out", "o.jsonl"),
    ("rm", "eval", "--model", NO_MODEL, "--data", "@dir"),
    ("data", "label", "--in", "@dir", "--out", "l.parquet", "--judge", "none"),
    ("verify", "--file", "@dir"),
], ids=lambda t: " ".join(t[:2]))
def test_a_folder_named_like_a_data_file_is_called_a_directory(capsys, files, template):
    line = _refused(capsys, *_args(files, template))
    assert f"{files['dir']} is a directory" in line and "not found" not in line


# ------------------------------------------------------------------ outputs

OVERWRITERS = [  # (command, the input it would overwrite)
    (("rm", "score", "--model", NO_MODEL, "--file", "@triples", "--out", "@same"), "triples"),
    (("data", "build", "--dataset", "@problems", "--n", "4", "--out", "@same"), "problems"),
    (("data", "perturbed", "--dataset", "@problems", "--n", "4", "--out", "@same",
      "--solution-field", "answer"), "problems"),
    (("data", "collect", "--dataset", "@problems", "--generators", f"hf:{NO_MODEL}",
      "--out", "@same"), "problems"),
    (("data", "label", "--in", "@triples", "--out", "@same", "--judge", "none"), "triples"),
]


@pytest.mark.parametrize("template,source", OVERWRITERS, ids=lambda t: " ".join(t[:2]))
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(capsys, files, template,
                                                                    source):
    path = files[source]
    before = path.read_bytes()
    same = f"{path.parent}/sub/../{path.name}"  # another spelling of the same file
    args = [same if a == "@same" else a for a in _args(files, template)]
    line = _refused(capsys, *args)
    assert "is the same file as" in line and "pick another --out" in line
    assert path.read_bytes() == before


def test_output_paths_of_the_wrong_kind_are_refused_before_work(capsys, files):
    folder, a_file = files["dir"], files["problems"]
    line = _refused(capsys, "rm", "score", "--model", NO_MODEL, "--file", files["triples"],
                    "--out", folder)
    assert f"--out {folder} is a directory" in line
    line = _refused(capsys, "rm", "score", "--model", NO_MODEL, "--file", files["triples"],
                    "--out", a_file / "scores.jsonl")
    assert f"{a_file} is a file, not a folder" in line
    for out in (a_file, a_file / "rm"):
        line = _refused(capsys, "rm", "train", "--data", files["triples"], "--base", NO_MODEL,
                        "--out", out)
        assert f"{a_file} is a file; this writes a folder" in line


# ------------------------------------------------------------------ options

@pytest.mark.parametrize("dtype", ["float99", "nn"])
def test_a_dtype_that_is_not_one_is_refused_with_the_accepted_names(capsys, files, dtype):
    want = f"--dtype must be one of auto, float32, bfloat16, float16, got '{dtype}'"
    for args in (("rm", "train", "--data", files["triples"], "--base", NO_MODEL, "--out",
                  files["tmp"] / "rm"),
                 ("data", "collect", "--dataset", files["problems"], "--generators",
                  f"hf:{NO_MODEL}", "--out", files["tmp"] / "c.parquet")):
        assert want in _refused(capsys, *args, "--dtype", dtype)
    # eval, bench and training load through these: they say the same before touching the model
    for load in (load_causal_lm, load_sequence_classifier):
        with pytest.raises(UserError, match=want):
            load(NO_MODEL, dtype=dtype)


@pytest.mark.parametrize("value", ["0", "nan", "inf", "-1"])
def test_timeouts_must_be_finite_and_positive(capsys, files, value):
    line = _refused(capsys, "verify", "--completion", "x", "--reference", "4", "--timeout", value)
    assert "--timeout must be a finite number of seconds > 0" in line
    line = _refused(capsys, "data", "label", "--in", files["triples"], "--out",
                    files["tmp"] / "l.parquet", "--judge", "none", "--policy", "verifier",
                    "--verifier-timeout", value)
    assert "--verifier-timeout must be a finite number of seconds > 0" in line


@pytest.mark.parametrize("value", ["2", "nan", "-0.1"])
def test_rm_eval_threshold_is_a_probability(capsys, files, value):
    line = _refused(capsys, "rm", "eval", "--model", NO_MODEL, "--data", files["triples"],
                    "--threshold", value)
    assert "--threshold must be in [0, 1]" in line


def test_a_bad_verifier_workers_variable_is_named(monkeypatch, files):
    monkeypatch.setenv("COOPER_VERIFY_WORKERS", "abc")
    with pytest.raises(UserError, match="COOPER_VERIFY_WORKERS must be a positive integer"):
        default_workers()
    env = cli_env(COOPER_VERIFY_WORKERS="abc")
    for args in (("verify", "--completion", "x", "--reference", "4"),
                 ("data", "label", "--in", files["triples"], "--out", files["tmp"] / "l.parquet",
                  "--judge", "none", "--policy", "verifier")):
        proc = run_cli(*args, check=False, env=env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "COOPER_VERIFY_WORKERS must be a positive integer" in proc.stderr


# ------------------------------------------------------------------ sizes and rows

def test_an_impossible_build_size_fails_at_once_with_the_largest_possible(capsys, tmp_path):
    # arith_small/train has 5000 problems: at most 5000 correct and 5000 wrong rows
    line = _refused(capsys, "data", "build", "--dataset", "arith_small", "--n", "100000",
                    "--out", tmp_path / "x.jsonl")
    assert "only 10000 of the 100000 rows" in line and "lower --n to at most 10000" in line
    assert not (tmp_path / "x.jsonl").exists()
    # the bound follows the label split: 0.3 of 7143 rounds to 2143 correct, 5000 wrong
    check_size(7143, 5000, 0.3, "five thousand")
    with pytest.raises(UserError, match="only 7143 of the 7144 rows could be made from five"):
        check_size(7144, 5000, 0.3, "five thousand")


def test_label_rows_of_the_wrong_type_stop_or_are_skipped_and_counted(capsys, files):
    data = files["triples"]
    with data.open("a") as f:  # line 5: a number where the completion text belongs
        f.write(json.dumps({"question": "What is 9+1?", "reference": "10", "completion": 10})
                + "\n")
    out = files["tmp"] / "l.parquet"
    args = ("data", "label", "--in", data, "--out", out, "--judge", "none", "--policy",
            "verifier")
    line = _refused(capsys, *args)
    assert f"{data}:5: 'completion' must be text, got int" in line and "--skip-bad" in line
    code, stdout, _ = _cli(capsys, *args, "--skip-bad")
    assert code == 0 and f"skipped 1 bad row(s) of 5; first: {data}:5" in stdout
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["skipped"] == 1 and stats["rows"] == 4


def test_collect_with_every_request_failed_exits_non_zero_and_keeps_the_count(capsys, files):
    out = files["tmp"] / "c.parquet"
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    code, stdout, err = _cli(capsys, "data", "collect", "--dataset", files["problems"],
                             "--limit", "2", "--n", "1", "--generators", f"api:m@{url}",
                             "--max-retries", "0", "--out", out)
    assert code == 2 and "error: every one of the 2 request(s) failed (refused: 2)" in err
    assert "0 ok, 2 failed" in stdout
    stats = json.loads((files["tmp"] / "c.stats.json").read_text())
    assert stats["failed"] == 2 and stats["ok"] == 0


def test_the_row_size_limit_is_checked_and_said_in_readable_units(tmp_path):
    from cooper.data.problems import load_problems

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"question": "What is 2 + 2?", "answer": "4"}) + "\n")
    with pytest.raises(UserError, match=r"row is \d+ bytes, over the 10 bytes limit"):
        load_problems(data, max_row_bytes=10)
    for bad in (0, -1):
        with pytest.raises(UserError, match="--max-row-bytes must be >= 1"):
            load_problems(data, max_row_bytes=bad)
    assert len(load_problems(data, max_row_bytes=4096).problems) == 1

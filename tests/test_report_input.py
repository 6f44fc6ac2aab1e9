"""Bad input to `cooper report`, `cooper eval`, `cooper bench` and `cooper models list`: a clear
one-line error (exit 2, no traceback) before the work starts, and nothing stated that the data
does not hold. Through the real CLI, and the report's real functions."""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from cooper.report.experiment_report import NO_VERDICT, build_report
from test_report import synthetic_experiment

pytestmark = pytest.mark.smoke  # whole commands, seconds each

ENV = cli_env(OMP_NUM_THREADS="1")


def refused(*args, cwd: Path | None = None) -> str:
    """Run ``cooper ARGS``, assert it ends with exit 2 and one error line (no traceback);
    return that line."""
    proc = run_cli(*args, check=False, env=ENV, cwd=cwd)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


# ------------------------------------------------------------------ cooper report

def test_an_experiment_with_no_step_logged_has_no_verdict(tmp_path):
    """A folder holding only experiment.yaml: exit 0 (an experiment in its setup is a folder
    the report reads), the report and the terminal say there is no verdict yet, and no
    finding is stated."""
    folder = tmp_path / "only"
    folder.mkdir()
    shutil.copy(synthetic_experiment(tmp_path / "exp") / "experiment.yaml", folder)
    proc = run_cli("report", folder, env=ENV)
    assert f"note: {NO_VERDICT}" in proc.stdout
    result = (folder / "report" / "report.md").read_text().split("## How to read this")[0]
    assert f"**{NO_VERDICT}**" in result
    for finding in ("No arm paid", "Hacked:", "Never judged", "ended closest", "Validity"):
        assert finding not in result


@pytest.mark.parametrize("unstarted, sentences", [
    # fixed RM hacked, the Cooper arms never started: they are not called clean
    (("cooper", "cooper_x"), ["- Hacked: fixed RM in 2 of 2 seeds.",
                              "- Not judged, not enough data: Cooper and Cooper X."]),
    # Cooper clean, the rest not started: no "no arm was hacked" over arms without data
    (("rm", "cooper_x"), ["- Never judged hacked: Cooper (not hacked in 2 of 2 seeds).",
                          "- Not judged, not enough data: fixed RM and Cooper X."]),
])
def test_a_partly_started_experiment_reports_the_arms_that_ran(tmp_path, unstarted, sentences):
    folder = synthetic_experiment(tmp_path / "exp")
    for seed in (0, 1):
        for arm in unstarted:
            shutil.rmtree(folder / f"seed-{seed}" / "arms" / arm)
    paths = build_report(folder)
    assert not paths.notice
    result = paths.markdown.read_text().split("## How to read this")[0]
    assert "No arm paid by a reward model was hacked" not in result
    for sentence in sentences:
        assert sentence in result


def _corrupt_line(path: Path, line: bytes, at: int = 2) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[at] = line
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("line, why", [
    (b"[1,2]", "line 3 is [1, 2], not a JSON object"),
    (b'{"step": "two", "reward/rule_mean": 0.5}', "line 3 has step 'two', not a whole number"),
    (b'{"reward/rule_mean": 0.5}', "line 3 has no step"),
    (b'{"step": 2, "loss": 0.1}\xff', "line 3 is not UTF-8 text"),
    (b'{"step": 2, "loss"', "line 3 is not JSON"),
], ids=["array", "text-step", "no-step", "bad-byte", "cut"])
@pytest.mark.parametrize("where", ["run", "experiment"])
def test_a_bad_metrics_line_is_named_with_what_is_wrong(tmp_path, line, why, where):
    folder = synthetic_experiment(tmp_path / "exp", steps=4, seeds=(0,), arms=("rule", "rm"))
    arm = folder / "seed-0" / "arms" / "rm"
    _corrupt_line(arm / "metrics.jsonl", line)
    error = refused("report", arm if where == "run" else folder)
    assert f"{arm / 'metrics.jsonl'}, {why}" in error
    assert not (arm / "report").exists() and not (folder / "report").exists()


def test_a_last_line_cut_short_is_still_left_out(tmp_path):
    """A run killed mid-write leaves half a line at the end: not an error (the run may still
    be going), even when the cut fell inside a multi-byte character."""
    folder = synthetic_experiment(tmp_path / "exp", steps=4, seeds=(0,), arms=("rule", "rm"))
    metrics = folder / "seed-0" / "arms" / "rm" / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes() + b'{"step": 5, "note": "\xc3')
    run_cli("report", metrics.parent, env=ENV)


@pytest.mark.parametrize("name, text, why", [
    ("final_eval.json", '{"benchmarks": ', "cannot be read (not JSON"),
    ("trained.json", "[600]", "holds [600], not the JSON object"),
    ("setup.json", "\xff", "cannot be read"),
], ids=["cut", "array", "bad-byte"])
def test_a_damaged_stage_record_is_named(tmp_path, name, text, why):
    folder = synthetic_experiment(tmp_path / "exp", steps=4, seeds=(0,), arms=("rule", "rm"))
    path = folder / "seed-0" / ("setup" if name == "setup.json" else "arms/rm") / name
    path.write_bytes(text.encode("latin-1"))
    assert f"{path} {why}" in refused("report", folder)


# ------------------------------------------------------------------ output paths

def _results(folder: Path) -> Path:
    """A finished `cooper eval` run folder, as far as `eval compare` reads it."""
    folder.mkdir(parents=True)
    entry = {"accuracy": 0.5, "majority_accuracy": 0.5, "pass_at_k": {"1": 0.5}}
    (folder / "results.json").write_text(json.dumps({"benchmarks": {"svamp": entry}}))
    return folder


@pytest.mark.parametrize("args, message", [
    (["eval", "compare", "e1", "e1", "--md", "adir"], "--md adir is a directory"),
    (["eval", "compare", "e1", "e1", "--csv", "afile/t.csv"], "afile is a file, not a folder"),
    (["report", "exp", "--out", "afile"], "--out afile: afile is a file"),
    (["report", "exp", "--out", "afile/report"], "afile is a file"),
    (["bench", "verify", "--limit", "2", "--skip-adversarial", "--out", "adir"],
     "--out adir is a directory"),
    (["bench", "step", "--markdown", "adir"], "--markdown adir is a directory"),
], ids=["compare-md", "compare-csv", "report", "report-below-file", "bench-out",
        "bench-markdown"])
def test_an_output_path_that_cannot_be_written_fails_before_the_work(tmp_path, args, message):
    _results(tmp_path / "e1")
    synthetic_experiment(tmp_path / "exp", steps=4, seeds=(0,), arms=("rule", "rm"))
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("keep me")
    proc = run_cli(*args, check=False, env=ENV, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""  # nothing ran: no table, no benchmark JSON, no report
    assert not (tmp_path / "exp" / "report").exists()
    assert list((tmp_path / "adir").iterdir()) == []
    assert (tmp_path / "afile").read_text() == "keep me"


# ------------------------------------------------------------------ cooper eval

@pytest.mark.parametrize("text, why", [
    ('{"benchmarks": ', "cannot be read (not JSON: Expecting value, line 1 column 16)"),
    ('{"foo": 1}', "holds no cooper eval results"),
    ('{"benchmarks": {"svamp": {"accuracy": 0.5}}}', "holds no cooper eval results"),
], ids=["cut", "other-object", "no-pass-at-k"])
def test_compare_names_a_damaged_results_file(tmp_path, text, why):
    _results(tmp_path / "e1")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "results.json").write_text(text)
    error = refused("eval", "compare", "e1", "half", cwd=tmp_path)
    assert f"half/results.json {why}" in error and "--out half" in error


@pytest.mark.parametrize("value", ["0", "-1"])
def test_max_row_bytes_below_one_is_refused_before_the_model_loads(tmp_path, value):
    error = refused("eval", "--model", tmp_path / "no-model", "--benchmarks", "svamp",
                    "--out", tmp_path / "run", "--max-row-bytes", value)
    assert "--max-row-bytes must be >= 1" in error and error.endswith(value)
    assert not (tmp_path / "run").exists()


FAILED_STARTS = {
    "model": ["--model", "/nonexistent/model"],
    "backend": pytest.param(["--backend", "vllm"], marks=pytest.mark.skipif(
        importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")),
}


@pytest.mark.parametrize("wrong", FAILED_STARTS.values(), ids=FAILED_STARTS.keys())
def test_a_failed_start_does_not_lock_its_folder(tiny_models, tmp_path, wrong):
    """A start whose model or backend did not load left run.json and no sample: the rerun with
    the right settings starts the folder anew instead of refusing it."""
    args = ["eval", "--benchmarks", "svamp", "--limit", "1", "--n", "1", "--max-new-tokens",
            "4", "--no-progress", "--out", tmp_path / "run"]
    refused(*args, "--model", tiny_models.policy, *wrong)
    assert (tmp_path / "run" / "run.json").is_file()
    proc = run_cli(*args, "--model", tiny_models.policy, env=ENV)
    assert "1 samples computed, 0 reused" in proc.stdout
    assert "holds no samples yet: starting it with these settings" in proc.stderr
    protocol = json.loads((tmp_path / "run" / "run.json").read_text())
    assert protocol["model"] == str(tiny_models.policy) and protocol["backend"] == "hf"
    # with samples in it, a cut run.json is an error, not a fresh start over them
    (tmp_path / "run" / "run.json").write_text('{"model": ')
    error = refused(*args, "--model", tiny_models.policy)
    assert "run/run.json cannot be read (not JSON" in error and "pick a new --out" in error


# ------------------------------------------------------------------ cooper bench step

@pytest.mark.parametrize("args, message", [
    (["max_steps=abc"], "max_steps=abc: the bench sets max_steps itself (each run takes "
                        "--warmup + --steps steps); drop it"),
    (["validation={enabled: true}"], "the bench sets validation.enabled itself"),
    (["reward.mode=cooper"], "the bench sets reward.mode itself (each mode sets its own"),
    (["reward.model=x"], "give the reward model with --rm"),
    (["foo=1"], "unknown setting 'foo'"),
    (["rollout.samples_per_prompt=1"], "rollout.samples_per_prompt must be >= 2"),
    (["--preset", "hacking_cpu", "train.max_steps=3"], "the bench sets train.max_steps itself"),
    (["--preset", "hacking_cpu", "seeds=1,2"], "give it with --seed"),
    (["--preset", "hacking_cpu", "foo=1"], "unknown setting 'foo'"),
], ids=["max-steps", "validation-section", "mode", "reward-model", "unknown", "invalid",
        "experiment-max-steps", "experiment-seeds", "experiment-unknown"])
def test_bench_step_checks_the_settings_before_anything_runs(tmp_path, args, message):
    t0 = time.monotonic()
    proc = run_cli("bench", "step", *args, "--out", tmp_path / "b.json", check=False, env=ENV)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert message in proc.stderr
    # no training run started, no reward model or setup built
    assert "[bench step]" not in proc.stderr and not (tmp_path / "b.json").exists()
    assert time.monotonic() - t0 < 60


# ------------------------------------------------------------------ cooper models list

def test_models_list_shows_derived_models_as_they_are(tmp_path):
    import torch
    from safetensors.torch import save_file

    def model(folder: Path, numbers: int = 300_000) -> None:
        folder.mkdir(parents=True)
        save_file({"w": torch.zeros(numbers)}, folder / "model.safetensors")
        (folder / "config.json").write_text("{}")

    models = tmp_path / "models"
    model(models / "base-first2")  # 1.1 MiB of weights
    model(models / "tiny-shipped" / "policy", 1000)
    model(models / "tiny-shipped" / "reward", 1000)
    model(models / "cut-first1")
    weights = models / "cut-first1" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    (models / "half-first3").mkdir()  # a build that never got its config
    out = run_cli("models", "list", env=cli_env(COOPER_CACHE=str(tmp_path))).stdout
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "1.1 MiB  complete (the first 2 layers of base;" in rows["base-first2"]
    assert "8 KiB  complete (a shipped tiny policy and a tiny reward model;" in rows["tiny-shipped"]
    assert "INCOMPLETE: model.safetensors: weights file size does not match" in rows["cut-first1"]
    assert "INCOMPLETE: no config.json" in rows["half-first3"]

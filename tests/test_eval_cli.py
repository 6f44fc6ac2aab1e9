"""`cooper eval` and `cooper eval compare` end to end: real CLI processes, tiny random model."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli_env, run_cli
from cooper.data.problems import load_problems
from cooper.eval.sampling import evaluate_problems
from cooper.infra.generation import HFGenerator, SamplingConfig

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

FAST = ["--n", "2", "--max-new-tokens", "12", "--no-progress"]
# One intra-op thread per subprocess: a tiny model gains nothing from more, and on a shared
# machine spinning thread pools slow everything down.
ENV = cli_env(OMP_NUM_THREADS="1")


def cli(*args, **kw):
    return run_cli(*args, env=ENV, **kw)


def _samples(run: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (run / "samples" / f"{name}.jsonl").read_text().splitlines()]


def _results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


@pytest.fixture(scope="module")
def local_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "mybench.jsonl"
    rows = [{"uid": f"u{i}", "problem": f"What is {i} times 3?", "solution": 3 * i}
            for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def run_a(tiny_models, local_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "a"
    cli("eval", "--model", tiny_models.policy, "--benchmarks", f"svamp,{local_file}",
            "--question-field", "problem", "--answer-field", "solution", "--id-field", "uid",
            "--prompt-template", "Solve: {question}\nEnd with \\boxed{}.", "--limit", "6",
            "--chunk-size", "4", "--threads", "1", "--out", out, *FAST)
    return out


def test_eval_writes_samples_and_results(run_a, local_file):
    res = _results(run_a)
    assert list(res["benchmarks"]) == ["svamp", "mybench"]
    assert res["protocol"]["temperature"] == 0.7 and res["protocol"]["top_p"] == 0.95
    assert res["versions"]["torch"] and res["wall_time_s"] > 0
    assert (res["samples_computed"], res["samples_reused"]) == (22, 0)  # (6 + 5 problems) x 2
    for name, n_problems in (("svamp", 6), ("mybench", 5)):
        rows = _samples(run_a, name)
        assert len(rows) == n_problems * 2
        assert len({(r["problem_id"], r["sample"]) for r in rows}) == len(rows)
        assert all("Solve: " in r["prompt"] and "\\boxed{}" in r["prompt"] for r in rows)
        # the reported numbers are those of the saved samples
        m = res["benchmarks"][name]
        assert m["accuracy"] == pytest.approx(sum(r["correct"] for r in rows) / len(rows))
        assert m["mean_tokens"] == pytest.approx(sum(r["num_tokens"] for r in rows) / len(rows))
    assert {r["problem_id"] for r in _samples(run_a, "mybench")} == {f"u{i}" for i in range(5)}
    assert _samples(run_a, "mybench")[0]["reference"] == "0"
    avg = res["average"]["accuracy"]
    assert avg == pytest.approx((res["benchmarks"]["svamp"]["accuracy"]
                                 + res["benchmarks"]["mybench"]["accuracy"]) / 2)
    assert not (run_a / "chunks").exists()


def test_cli_run_matches_the_in_process_evaluator(run_a, tiny_models):
    # the trainer's validation calls evaluate_problems: same settings, same samples
    import torch

    gen = HFGenerator.load(str(tiny_models.policy), batch_size=16)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the CLI process: the same float reductions
    try:
        r = evaluate_problems(gen, list(load_problems("svamp", limit=6)),
                              SamplingConfig(n=2, temperature=0.7, top_p=0.95, max_new_tokens=12),
                              benchmark="svamp", chunk_size=4,
                              prompt_template="Solve: {question}\nEnd with \\boxed{}.")
    finally:
        torch.set_num_threads(threads)
    saved = _samples(run_a, "svamp")
    assert [(s.completion, s.correct, s.num_tokens) for s in r.samples] == [
        (x["completion"], x["correct"], x["num_tokens"]) for x in saved]


def test_rerun_of_a_finished_run_computes_nothing(run_a, tiny_models, local_file):
    before = _results(run_a)
    out = cli("eval", "--model", tiny_models.policy, "--benchmarks", f"svamp,{local_file}",
                  "--question-field", "problem", "--answer-field", "solution", "--id-field", "uid",
                  "--prompt-template", "Solve: {question}\nEnd with \\boxed{}.", "--limit", "6",
                  "--chunk-size", "4", "--out", run_a, *FAST).stdout
    after = _results(run_a)
    assert (after["samples_computed"], after["samples_reused"]) == (0, 22)
    assert after["benchmarks"] == before["benchmarks"] and "0 samples computed" in out


def test_other_settings_in_the_same_folder_are_refused(run_a, tiny_models, local_file):
    proc = cli("eval", "--model", tiny_models.policy, "--benchmarks", f"svamp,{local_file}",
                   "--question-field", "problem", "--answer-field", "solution",
                   "--id-field", "uid", "--limit", "6", "--chunk-size", "4", "--out", run_a,
                   *FAST[:2], "--max-new-tokens", "13", check=False)
    assert proc.returncode == 2
    assert "max_new_tokens" in proc.stderr and "prompt_template" in proc.stderr


def test_compare_table(run_a, tiny_models, tmp_path):
    b = tmp_path / "b"
    cli("eval", "--model", tiny_models.policy, "--benchmarks", "svamp", "--limit", "3",
            "--seed", "1", "--out", b, *FAST)
    md, csv_path = tmp_path / "t.md", tmp_path / "t.csv"
    out = cli("eval", "compare", run_a, b, "--labels", "base,seed1", "--md", md,
                  "--csv", csv_path).stdout
    assert out == md.read_text()
    assert "| run | svamp | mybench | Avg |" in out
    rows = list(csv.DictReader(csv_path.open()))
    assert [r["run"] for r in rows] == ["base", "seed1"]
    ra, rb = _results(run_a), _results(b)
    assert float(rows[0]["svamp"]) == pytest.approx(100 * ra["benchmarks"]["svamp"]["accuracy"], abs=0.005)
    assert float(rows[0]["avg"]) == pytest.approx(100 * ra["average"]["accuracy"], abs=0.005)
    assert rows[1]["mybench"] == ""  # not evaluated in run b
    assert float(rows[1]["avg"]) == pytest.approx(100 * rb["average"]["accuracy"], abs=0.005)
    maj = cli("eval", "compare", run_a, "--metric", "pass@2").stdout
    assert f"{100 * ra['benchmarks']['svamp']['pass_at_k']['2']:.2f}" in maj
    bad = cli("eval", "compare", run_a, "--metric", "pass@4", check=False)
    assert bad.returncode == 2 and "pass@1, pass@2" in bad.stderr
    missing = cli("eval", "compare", tmp_path, check=False)
    assert missing.returncode == 2 and "no results.json" in missing.stderr


def test_clear_errors(tiny_models, local_file, tmp_path):
    unknown = cli("eval", "--model", tiny_models.policy, "--benchmarks", "gsm8k,aime",
                      "--out", tmp_path / "x", check=False)
    assert unknown.returncode == 2
    assert "unknown benchmark 'aime'" in unknown.stderr and "gsm8k, svamp, math500" in unknown.stderr
    field = cli("eval", "--model", tiny_models.policy, "--benchmarks", local_file,
                    "--out", tmp_path / "y", check=False)
    assert field.returncode == 2
    assert "missing field 'question'" in field.stderr and "uid, problem, solution" in field.stderr
    no_out = cli("eval", "--model", tiny_models.policy, check=False)
    assert no_out.returncode == 2 and "--out DIR is required" in no_out.stderr
    template = cli("eval", "--prompt-template", "no placeholder", "--out", tmp_path / "z",
                       check=False)
    assert template.returncode == 2 and "{question}" in template.stderr
    threads = cli("eval", "--threads", "0", "--out", tmp_path / "t", check=False)
    assert threads.returncode == 2 and "--threads must be >= 1" in threads.stderr


def test_a_benchmark_split_is_evaluated_and_named(tiny_models, tmp_path):
    """NAME:SPLIT as the experiment's final_eval writes it: two splits of one dataset are two
    benchmarks, each under its own name in results.json and samples/."""
    out = tmp_path / "splits"
    printed = cli("eval", "--model", tiny_models.policy, "--benchmarks",
                  "arith_2x1:validation,arith_2x1:test", "--limit", "3", "--out", out,
                  *FAST).stdout
    res = _results(out)
    assert list(res["benchmarks"]) == ["arith_2x1:validation", "arith_2x1:test"]
    assert [b["source"] for b in res["protocol"]["benchmarks"]] == [
        "arith_2x1:validation", "arith_2x1:test"]
    for split in ("validation", "test"):
        rows = _samples(out, f"arith_2x1:{split}")
        # the split's own problems, not the test split's under another name
        assert [r["problem_id"] for r in rows[::2]] == [
            p.id for p in load_problems("arith_2x1", split, limit=3)]
        assert {r["benchmark"] for r in rows} == {f"arith_2x1:{split}"}
        assert res["benchmarks"][f"arith_2x1:{split}"]["accuracy"] == pytest.approx(
            sum(r["correct"] for r in rows) / len(rows))
    assert "arith_2x1:validation" in printed and "arith_2x1:test" in printed


def test_a_bad_split_is_a_clear_error(tiny_models, local_file, tmp_path):
    unknown = cli("eval", "--model", tiny_models.policy, "--benchmarks", "arith_2x1:dev",
                  "--out", tmp_path / "a", check=False)
    assert unknown.returncode == 2
    assert ("--benchmarks arith_2x1:dev: arith_2x1 has no split 'dev'; its splits: train, "
            "validation, test") in unknown.stderr
    assert not (tmp_path / "a").exists()  # refused before anything is written
    svamp = cli("eval", "--model", tiny_models.policy, "--benchmarks", "svamp:train",
                "--out", tmp_path / "b", check=False)
    assert svamp.returncode == 2 and "svamp has no split 'train'; its splits: test" in svamp.stderr
    twice = cli("eval", "--model", tiny_models.policy, "--benchmarks", "gsm8k,gsm8k:test",
                "--out", tmp_path / "c", check=False)
    assert twice.returncode == 2 and "names gsm8k's test split twice" in twice.stderr
    on_file = cli("eval", "--model", tiny_models.policy, "--benchmarks", f"{local_file}:test",
                  "--out", tmp_path / "d", check=False)
    assert on_file.returncode == 2 and "a file has no splits" in on_file.stderr


def test_eval_and_the_experiment_read_benchmarks_alike():
    from cooper.config.experiment import ExperimentConfig
    from cooper.data.problems import benchmark_label, parse_benchmark

    assert parse_benchmark("arith_2x1:validation") == ("arith_2x1", "validation")
    assert parse_benchmark(" gsm8k ") == ("gsm8k", None)
    assert parse_benchmark("runs:2/my.jsonl") == ("runs:2/my.jsonl", None)  # a path stays whole
    assert benchmark_label("arith_2x1", "test") == "arith_2x1:test"
    assert benchmark_label("gsm8k", None) == "gsm8k"
    exp = ExperimentConfig()
    exp.final_eval.benchmarks = "arith_2x1:test, gsm8k,arith_small:"
    assert exp.benchmark_list() == [parse_benchmark(x) for x in exp.final_eval.benchmarks.split(",")]


def test_one_process_writes_a_run_at_a_time(tiny_models, tmp_path):
    from cooper.eval.run import _exclusive

    out = tmp_path / "busy"
    out.mkdir()
    with _exclusive(out):  # as a running cooper eval holds it
        proc = cli("eval", "--model", tiny_models.policy, "--benchmarks", "svamp", "--limit", "1",
                   "--out", out, *FAST, check=False)
    assert proc.returncode == 2 and "another cooper eval is writing" in proc.stderr
    cli("eval", "--model", tiny_models.policy, "--benchmarks", "svamp", "--limit", "1",
        "--out", out, *FAST)  # free again
    assert (out / "results.json").is_file()


def test_vllm_backend_without_vllm_is_a_clear_error(tiny_models, tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    proc = cli("eval", "--model", tiny_models.policy, "--benchmarks", "svamp", "--limit", "1",
                   "--backend", "vllm", "--out", tmp_path / "v", check=False)
    assert proc.returncode == 2 and "vLLM" in proc.stderr and "--backend hf" in proc.stderr


# ------------------------------------------------------------------ resume after SIGKILL


def test_resume_after_sigkill_gives_the_uninterrupted_numbers(tiny_models, tmp_path):
    args = ["eval", "--model", str(tiny_models.policy), "--benchmarks", "gsm8k,svamp",
            "--limit", "16", "--n", "2", "--max-new-tokens", "12", "--chunk-size", "4",
            "--batch-size", "8", "--no-progress"]
    total = 2 * 16 * 2
    full = tmp_path / "full"
    cli(*args, "--out", full)

    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "cooper", *args, "--out", str(killed)],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chunk_dir = killed / "chunks" / "gsm8k"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if chunk_dir.is_dir() and any(chunk_dir.glob("[0-9]*.json")):
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done_before = sum(len(json.loads(p.read_text())["samples"])
                      for p in chunk_dir.glob("[0-9]*.json"))
    assert 0 < done_before < total and not (killed / "results.json").exists()

    out = cli(*args, "--out", killed).stdout
    res, ref = _results(killed), _results(full)
    # no sample computed twice: the rerun computed exactly what the killed run had not written
    assert (res["samples_computed"], res["samples_reused"]) == (total - done_before, done_before)
    assert f"{total - done_before} samples computed, {done_before} reused" in out
    assert res["benchmarks"] == {k: {**v, "compute_time_s": res["benchmarks"][k]["compute_time_s"]}
                                 for k, v in ref["benchmarks"].items()}
    assert res["average"] == ref["average"]
    for name in ("gsm8k", "svamp"):
        assert _samples(killed, name) == _samples(full, name)


def test_every_evaluation_default_is_the_papers_protocol():
    from cooper.cli import build_parser
    from cooper.config.experiment import FinalEvalConfig
    from cooper.config.sections import ValidationConfig
    from cooper.eval.settings import EvalSettings
    from cooper.infra.protocol import PAPER_SAMPLES, PAPER_TEMPERATURE, PAPER_TOP_P

    assert (PAPER_TEMPERATURE, PAPER_TOP_P, PAPER_SAMPLES) == (0.7, 0.95, 8)
    args = build_parser().parse_args(["eval", "--out", "x"])
    s = EvalSettings(model="m", benchmarks=("gsm8k",)).sampling
    for t, p in ((SamplingConfig().temperature, SamplingConfig().top_p),
                 (ValidationConfig().temperature, ValidationConfig().top_p),
                 (FinalEvalConfig().temperature, FinalEvalConfig().top_p),
                 (args.temperature, args.top_p), (s.temperature, s.top_p)):
        assert (t, p) == (PAPER_TEMPERATURE, PAPER_TOP_P)
    assert args.n == s.n == PAPER_SAMPLES

"""`cooper rm train/eval/score` and `cooper bench rm` through the real CLI on tiny models.

The training set is synthetic and separable (correct completions say "right", wrong ones
"WRONG"): a randomly initialised tiny model can only pass the held-out bar by learning.
Training and the main evaluation run as a user runs them (a subprocess); further commands run
the same entry point in this process, to spare a Python start-up each.
"""

from __future__ import annotations

import json
import random

import pytest

from conftest import run_cli
from cooper.cli import main

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


def _in_process(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _write(path, n, seed):
    rng = random.Random(seed)
    with path.open("w") as f:
        for _ in range(n):
            a, b = rng.randint(1, 99), rng.randint(1, 99)
            for label in (True, False):
                word = "right" if label else "WRONG"
                completion = f"{a} plus {b}. " + " ".join([word] * rng.randint(2, 5))
                f.write(json.dumps({"question": f"What is {a}+{b}?", "reference": str(a + b),
                                    "completion": completion, "label": label,
                                    "source": "odd" if a % 2 else "even"}) + "\n")
    return path


@pytest.fixture(scope="module")
def trained(tiny_models, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rmcli")
    data = _write(tmp / "train.jsonl", 120, seed=0)
    out = tmp / "rm"
    proc = run_cli("rm", "train", "--data", data, "--base", tiny_models.policy, "--out", out,
                   "--lr", "3e-3", "--epochs", "2", "--batch-size", "16", "--holdout", "0.25",
                   "--max-length", "256", "--no-progress")
    return tmp, out, proc


def test_train_learns_a_separable_set(trained):
    tmp, out, proc = trained
    assert "epoch 2:" in proc.stdout and f"saved reward model to {out}" in proc.stdout
    report = json.loads((out / "train_report.json").read_text())
    assert report["heldout_size"] > 0 and report["train_size"] + report["heldout_size"] == 240
    assert report["epochs"][-1]["heldout"]["accuracy"] >= 0.95
    assert report["epochs"][-1]["train_loss"] < report["epochs"][0]["train_loss"]
    spec = json.loads((out / "cooper_rm.json").read_text())
    assert spec["max_length"] == 256 and (out / "model.safetensors").is_file()


def test_eval_json_on_fresh_data(trained, capsys):
    tmp, out, _ = trained
    test = _write(tmp / "test.jsonl", 40, seed=1)
    proc = run_cli("rm", "eval", "--model", out, "--data", test, "--json")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["n"] == 80 and result["accuracy"] >= 0.95 and result["auroc"] >= 0.95
    for key in ("precision", "recall", "f1", "ece", "confusion"):
        assert key in result
    assert set(result["by_source"]) == {"odd", "even"}
    assert "accuracy" in proc.stdout.splitlines()[1]  # the human-readable table comes first
    code, stdout, _ = _in_process(capsys, "rm", "eval", "--model", out, "--data", test, "--json",
                                  "--no-reference")
    assert code == 0 and json.loads(stdout.strip().splitlines()[-1])["no_reference"] is True


def test_score_writes_one_line_per_triple_in_order(trained, capsys):
    tmp, out, _ = trained
    test = _write(tmp / "score.jsonl", 5, seed=2)
    code, stdout, _ = _in_process(capsys, "rm", "score", "--model", out, "--file", test)
    lines = stdout.strip().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == [f"score-{i}" for i in range(10)]
    assert all(0 < r["score"] < 1 for r in rows)
    # the separable signal: every correct completion outscores its wrong twin
    assert all(rows[i]["score"] > rows[i + 1]["score"] for i in range(0, 10, 2))


def test_bad_rows_stop_with_file_and_line_or_are_counted(trained, capsys):
    tmp, out, _ = trained
    bad = tmp / "bad.jsonl"
    bad.write_text(json.dumps({"question": "Q", "reference": "1", "completion": "c",
                               "label": True}) + "\n{oops\n")
    proc = run_cli("rm", "eval", "--model", out, "--data", bad, check=False)
    assert proc.returncode == 2 and f"{bad}:2" in proc.stderr and "Traceback" not in proc.stderr
    code, stdout, stderr = _in_process(capsys, "rm", "eval", "--model", out, "--data", bad,
                                       "--skip-bad", "--json")
    assert code == 0 and "skipped 1 bad row" in stderr
    assert json.loads(stdout.strip().splitlines()[-1])["n"] == 1


def test_bad_settings_say_how_to_fix_them(trained, tiny_models):
    tmp, out, _ = trained
    proc = run_cli("rm", "train", "--data", tmp / "train.jsonl", "--base", tiny_models.policy,
                   "--out", out, check=False)
    assert proc.returncode == 2 and "--overwrite" in proc.stderr
    proc = run_cli("rm", "train", "--data", tmp / "train.jsonl", "--base", tiny_models.policy,
                   "--out", tmp / "new", "--holdout", "1.5", check=False)
    assert proc.returncode == 2 and "holdout must be in [0, 1)" in proc.stderr


def test_bench_rm_writes_its_keys(trained, capsys):
    tmp, out, _ = trained
    code, stdout, _ = _in_process(capsys, "bench", "rm", "--model", out, "--n", "12",
                                  "--batch-size", "4", "--repeats", "1",
                                  "--out", tmp / "bench.json")
    result = json.loads((tmp / "bench.json").read_text())
    assert result["n"] == 12 and result["seq_per_s"] > 0 and result["naive_seq_per_s"] > 0
    assert result["speedup"] > 0 and result["padded_tokens"] <= result["naive_padded_tokens"]
    assert result["max_score_difference"] < 1e-4
    assert code == 0 and "environment" in result and '"speedup"' in stdout


def test_bench_train_times_both_ways_of_the_same_computation(trained, capsys):
    tmp, out, _ = trained
    code, stdout, _ = _in_process(capsys, "bench", "train", "--model", out, "--data",
                                  tmp / "train.jsonl", "--n", "12", "--train-layers", "1",
                                  "--batch-size", "4", "--repeats", "1",
                                  "--out", tmp / "train.json")
    result = json.loads((tmp / "train.json").read_text())
    assert code == 0 and result["n"] == 12 and result["layers"] == 2
    assert result["seconds"] > 0 and result["whole_layer_seconds"] > 0 and result["speedup"] > 0
    # the same logits and gradients both ways, up to float rounding
    assert result["max_logit_difference"] < 1e-4
    assert result["max_relative_gradient_difference"] < 1e-4
    # every layer trained: nothing to cache, said as such
    code, _, err = _in_process(capsys, "bench", "train", "--model", out, "--data",
                               tmp / "train.jsonl", "--n", "4", "--train-layers", "2")
    assert code != 0 and "cannot be cached: no layer is frozen" in err
    empty = tmp / "empty.jsonl"
    empty.write_text("")
    code, _, err = _in_process(capsys, "bench", "train", "--model", out, "--data", empty)
    assert code != 0 and "no usable triples" in err  # a clear error, not a crash


def test_eval_balance_keeps_every_rare_row_and_as_many_of_the_other(trained, capsys, tmp_path):
    _, out, _ = trained
    rows = [json.loads(x) for x in _write(tmp_path / "all.jsonl", 30, seed=2).read_text().split("\n")
            if x]
    skewed = [r for r in rows if not r["label"]] + [r for r in rows if r["label"]][:6]
    path = tmp_path / "skewed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in skewed))
    code, stdout, _ = _in_process(capsys, "rm", "eval", "--model", out, "--data", path, "--json",
                                  "--balance", "0")
    result = json.loads(stdout.strip().splitlines()[-1])
    assert code == 0 and result["n"] == 12 and result["confusion"]["tp"] + \
        result["confusion"]["fn"] == 6
    one_label = tmp_path / "wrong_only.jsonl"
    one_label.write_text("".join(json.dumps(r) + "\n" for r in skewed if not r["label"]))
    code, _, stderr = _in_process(capsys, "rm", "eval", "--model", out, "--data", one_label,
                                  "--balance", "0")
    assert code != 0 and "both labels" in stderr


def test_the_same_seed_trains_the_same_reward_model(tiny_models, tmp_path, capsys):
    # the base is a causal LM: its score head is new, drawn at load, so --seed must fix it too
    # (both runs in this process, whose generator has moved on between them)
    from safetensors.torch import load_file

    data = _write(tmp_path / "train.jsonl", 20, seed=1)
    heads = []
    for run in ("a", "b", "c"):
        seed = "5" if run != "c" else "6"
        code, _, _ = _in_process(capsys, "rm", "train", "--data", data, "--base",
                                 tiny_models.policy, "--out", tmp_path / run, "--epochs", "1",
                                 "--batch-size", "8", "--holdout", "0", "--seed", seed,
                                 "--no-progress")
        assert code == 0
        weights = load_file(tmp_path / run / "model.safetensors")
        heads.append({k: v for k, v in weights.items() if k.startswith("score.")})
    assert heads[0] and all(heads[0][k].equal(heads[1][k]) for k in heads[0])
    assert not all(heads[0][k].equal(heads[2][k]) for k in heads[0])  # another seed: another

"""``cooper verify`` and ``cooper bench verify`` through the real CLI."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


def test_verify_one_pair():
    proc = run_cli("verify", "--completion", "so I think it is 72 in the end", "--reference",
                   "72.0", "--mode", "lenient")
    assert json.loads(proc.stdout) == {"correct": True, "extracted": "72", "reason": "correct"}


def test_verify_file_modes_and_summary(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"completion": r"so \boxed{\frac{1}{2}}", "reference": "0.5"},
            {"completion": "I got 72", "reference": 72},
            {"completion": r"\boxed{9^{9^{9^{9}}}}", "reference": "1"},
            {"completion": "The answer is 5.", "reference": "6"}]
    pairs.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    proc = run_cli("verify", "--file", pairs, "--timeout", "1", "--summary")
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["reason"] for o in out] == ["correct", "no_answer", "timeout", "wrong"]
    assert out[0]["extracted"] == r"\frac{1}{2}" and out[0]["correct"] is True
    assert all(set(o) == {"correct", "extracted", "reason"} for o in out)
    assert "4 pair(s)" in proc.stderr


def test_verify_bad_input_says_where_and_how(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"completion": "#### 1", "reference": "1"}\n{"completion": "#### 1"}\n')
    proc = run_cli("verify", "--file", bad, check=False)
    assert proc.returncode == 2 and f"{bad}:2: missing field 'reference'" in proc.stderr
    bad.write_text("not json\n")
    proc = run_cli("verify", "--file", bad, check=False)
    assert proc.returncode == 2 and f"{bad}:1: not valid JSON" in proc.stderr
    bad.write_bytes(b'{"completion": "\xff", "reference": "1"}\n')
    proc = run_cli("verify", "--file", bad, check=False)
    assert proc.returncode == 2 and "invalid UTF-8" in proc.stderr
    proc = run_cli("verify", "--completion", "x", check=False)
    assert proc.returncode == 2 and "needs --reference" in proc.stderr
    proc = run_cli("verify", "--file", tmp_path / "missing.jsonl", check=False)
    assert proc.returncode == 2 and "not found" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_verify_smoke(tmp_path):
    out = tmp_path / "bench.json"
    run_cli("bench", "verify", "--limit", "5", "--skip-adversarial", "--out", out)
    res = json.loads(out.read_text())
    for key in ("baseline_items_per_s", "items_per_s", "speedup", "agreement_with_baseline",
                "timeouts", "timeout_s", "disagreements", "command", "environment"):
        assert key in res, key
    assert res["items"] == 15 and res["per_set"]["gsm8k_gold"]["items"] == 5
    assert res["agreement_with_baseline"] == 1.0


@pytest.mark.slow
def test_bench_verify_adversarial(tmp_path):
    out = tmp_path / "bench.json"
    run_cli("bench", "verify", "--limit", "5", "--timeout", "1", "--out", out)
    res = json.loads(out.read_text())
    assert res["max_item_latency_s"] <= res["timeout_s"] + 1
    assert res["adversarial"]["timeouts"] >= 3 and res["timeouts"] >= 3

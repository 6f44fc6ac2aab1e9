"""tools/gpu_check.sh on bad input: an output folder it cannot write is refused at once, with
the fix, before anything runs (the check itself needs CUDA: tests/test_gpu.py, docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "gpu_check.sh"


def test_an_output_folder_it_cannot_write_is_refused_with_the_fix(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = subprocess.run(["bash", str(SCRIPT), str(blocker / "out")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "cannot write to" in proc.stderr and "give a writable folder" in proc.stderr
    assert "== machine" not in proc.stdout  # nothing ran


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=30).returncode == 0

"""Shared fixtures: tiny random models (no download) and the real CLI in a subprocess.

CLI tests run ``python -m cooper`` with this checkout's ``src`` first on PYTHONPATH, so they test
the tree under test whatever is installed in the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def pytest_configure(config):
    # Under pytest-xdist (make test runs two workers on two cores) each worker, and every command
    # it starts, uses one math thread: two workers of two threads each would oversubscribe the
    # cores. A thread count set by the user is kept.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_modifyitems(config, items):
    # Files holding a slow test (the embedded model: minutes each) first, the rest in their
    # order, tests of a file kept together. make test hands out files in this order (pytest-xdist's
    # --no-loadscope-reorder), so the long files start at once on both workers instead of running
    # last on one of them while the other idles.
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: False (slow) first


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.update(extra)
    return env


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for `accelerate launch --main_process_port` (accelerate
    sets MASTER_PORT from that flag, 29500 when it is missing, whatever the environment says)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, check: bool = True, timeout: float = 600, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``cooper ARGS`` as a user would, returning the finished process."""
    proc = subprocess.run([sys.executable, "-m", "cooper", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env or cli_env())
    if check and proc.returncode != 0:
        raise AssertionError(f"cooper {' '.join(map(str, args))} exited {proc.returncode}\n"
                             f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Folders of a tiny random causal LM and a tiny one-logit classifier (shared tokenizer)."""
    from cooper.experiment.testbed import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def released(tmp_path_factory):
    """A folder with a tiny random Qwen2ForSequenceClassification and its tokenizer only."""
    import torch
    from tokenizers.processors import TemplateProcessing
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    from cooper.experiment.testbed import tiny_tokenizer

    tok = tiny_tokenizer()
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single="<|im_start|> $A", special_tokens=[("<|im_start|>", tok.bos_token_id)])
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=2048, num_labels=1)
    assert config.pad_token_id is None
    torch.manual_seed(0)
    model = Qwen2ForSequenceClassification(config)
    with torch.no_grad():
        model.score.weight.mul_(50)  # spread the logits, so reading a wrong token shows
    folder = tmp_path_factory.mktemp("byo") / "verifyrm"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    assert sorted(p.name for p in folder.iterdir() if p.name.endswith(".json")) == [
        "config.json", "tokenizer.json", "tokenizer_config.json"]
    return folder

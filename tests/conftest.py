"""Shared fixtures: tiny random models (no download) and the real CLI in a process of its own.

CLI tests run ``cooper ARGS`` with this checkout's ``src`` first on PYTHONPATH, so they test the
tree under test whatever is installed in the environment: in a process forked from this worker's
CLI server, which imported the training stack once (``tests/cli_server.py`` says why), or in a new
``python -m cooper`` where the environment or the test asks for it (``run_cli(fresh=True)``;
``COOPER_TEST_FRESH=1`` for every command).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
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


class CliServer:
    """This worker's ``tests/cli_server.py`` process, started at its first use."""

    _server: CliServer | None = None
    _failed = False
    _lock = threading.Lock()
    # set per test by pytest; a command reads neither
    VOLATILE = ("PYTEST_CURRENT_TEST",)

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("cli_server.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
        self.ready = json.loads(self.proc.stdout.readline() or "{}").get("ready", False)

    @classmethod
    def for_env(cls, env: dict[str, str], default: bool) -> CliServer | None:
        """The server, when ``env`` is the one it started with. The default environment (this
        worker's, which a command run in this process may have added to) starts a new server
        when it changed; another one gets none."""
        if os.environ.get("COOPER_TEST_FRESH") or cls._failed:
            return None
        server = cls._server
        if server is not None and cls._key(env) != cls._key(server.env):
            if not default:
                return None
            server.proc.kill()
            server.proc.wait()
            server = None
        if server is None:
            server = cls._server = CliServer(env)
            if not server.ready:  # math threads already running: a fork could hang on them
                cls._failed = True
                server.proc.kill()
                return None
        return server

    def reply(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the CLI server (tests/cli_server.py) ended; COOPER_TEST_FRESH=1 "
                               "runs every command as a new process instead")
        return line

    @classmethod
    def _key(cls, env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k not in cls.VOLATILE}

    def run(self, argv: list[str], args: list[str], cwd: Path | None, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess:
        with self._lock, tempfile.TemporaryDirectory() as tmp:  # one command at a time
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            self.proc.stdin.write(json.dumps({
                "args": args, "cwd": str(cwd or os.getcwd()), "env": env, "stdout": str(out),
                "stderr": str(err)}) + "\n")
            self.proc.stdin.flush()
            pid = json.loads(self.reply())["pid"]
            killed = threading.Event()

            def kill():
                killed.set()
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:  # it ended just now
                    pass

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                status = json.loads(self.reply())["status"]
            finally:
                timer.cancel()
            stdout, stderr = out.read_text(), err.read_text()
        code = os.waitstatus_to_exitcode(status)
        if killed.is_set():
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, code, stdout, stderr)


def run_cli(*args: str, check: bool = True, timeout: float = 600, cwd: Path | None = None,
            env: dict[str, str] | None = None, fresh: bool = False
            ) -> subprocess.CompletedProcess:
    """Run ``cooper ARGS`` as a user would, returning the finished process.

    The process is forked from this worker's CLI server (``tests/cli_server.py``: the imports
    are done once), unless ``fresh`` or the environment differs from the server's: then it is a
    new ``python -m cooper``."""
    argv = [sys.executable, "-m", "cooper", *map(str, args)]
    default = env is None
    env = env or cli_env()
    server = None if fresh else CliServer.for_env(env, default)
    if server is not None:
        proc = server.run(argv, [str(a) for a in args], cwd=cwd, env=env, timeout=timeout)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env=env)
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

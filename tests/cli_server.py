"""Run ``cooper ARGS`` in a fresh process forked from one that has already imported the CLI.

Every ``python -m cooper`` that trains spends about 5 s of CPU importing torch, transformers, TRL,
pandas and datasets before it reads its arguments, and the suite starts about 300 commands, most
on tiny models that train in a second or two. Forking them instead took the suite's test time from
1977 to 1275 s (docs/development.md). Each pytest worker therefore starts this
module once as a server process that imports those libraries and the CLI, and forks a child for
every command. The child is a process of its own like any other command: its own memory, exit
status, standard streams (to files the caller reads back), working directory and environment; a
timeout kills it. pytest-forked and the like fork a test, not a command, hence this file.

What a forked command does not exercise is the interpreter's start and the CLI's import, so
``conftest.run_cli`` starts a real ``python -m cooper`` whenever the environment asked for is
not the one this server started with (libraries read some variables when they load, such as
OpenMP's thread count), or when a test asks for it (``fresh=True``).

The server runs no tensor work before it forks, and each child reseeds Python's, NumPy's and
torch's generators from the system, as a new process does. It serves only where no math thread
runs yet after the imports (checked): torch starts OpenMP's threads as it loads when it may use
more than one, and a forked child's first parallel product could wait forever on a pool it does
not have. So ``make test``'s workers (one math thread each) fork, and a plain ``pytest`` on a
machine of several cores starts new processes.

Protocol, one JSON line each way per command: the request ``{"args", "cwd", "env", "stdout",
"stderr"}`` gets ``{"pid"}`` at once and ``{"status"}`` (``os.waitpid``'s) when the child ends.
"""

from __future__ import annotations

import json
import os
import sys

# set by cooper.cli.main before torch loads (cooper.infra.threads): torch loads here under them,
# and a child's environment has them, or main would warn that torch loaded first
MATH_THREADS = {"MKL_DYNAMIC": "FALSE", "OMP_DYNAMIC": "FALSE"}
# set by main (unless --verbose) before transformers loads: no progress bar per model load
QUIET_LOADS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1"}
PRELOAD = ("torch", "transformers", "trl", "datasets", "pandas", "math_verify", "cooper.cli",
           "cooper.rl.trainer", "cooper.experiment.hacking", "cooper.report")


# pyarrow's allocator (jemalloc) starts this thread; jemalloc's own fork handlers restart it
FORK_SAFE_THREADS = {"jemalloc_bg_thd"}


def other_threads() -> list[str]:
    """The names of this process's threads but the main one (math threads would not survive a
    fork: a child's first parallel product could wait forever on a pool it does not have)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        if int(task) != os.getpid():
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
    return names


def child(request: dict) -> None:
    """In the forked child: become ``python -m cooper ARGS`` and never return."""
    code = 1
    try:
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update({**MATH_THREADS, **request["env"]})
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]  # as `python -m` puts the working directory first
        import random

        # a new process's own unseeded draws, not a copy of the server's state
        random.seed()
        sys.modules["numpy"].random.seed()
        sys.modules["torch"].seed()
        import runpy

        sys.argv = [os.path.join(os.path.dirname(sys.modules["cooper"].__file__),
                                 "__main__.py"), *request["args"]]
        try:
            runpy.run_module("cooper", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, int | None):
                print(e.code, file=sys.stderr)
        import atexit

        atexit._run_exitfuncs()  # what the interpreter runs at exit (tensorboard's writers)
    except BaseException:  # as the interpreter reports an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve() -> None:
    import importlib

    for name, value in {**MATH_THREADS, **QUIET_LOADS}.items():
        os.environ.setdefault(name, value)
    for name in PRELOAD:
        importlib.import_module(name)
    ready = set(other_threads()) <= FORK_SAFE_THREADS
    out = sys.stdout
    out.write(json.dumps({"ready": ready}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(request)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"status": status}) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()

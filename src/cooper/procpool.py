"""Worker processes whose calls have a hard wall-clock deadline, enforced by the parent.

Why not :class:`concurrent.futures.ProcessPoolExecutor` or :class:`multiprocessing.Pool`: neither
can stop a call that is already running. A hung task holds its worker forever
(``Future.cancel`` only cancels tasks that have not started) and killing a worker by hand breaks
the whole executor (``BrokenProcessPool``). Here every worker has its own pipe; the caller waits
on the pipes of its in-flight calls with a deadline; a worker that misses its deadline is
SIGKILLed and replaced, and only that call is reported as timed out.

Design points:

* **Any thread.** Nothing here installs a signal handler (Python allows that only in the main
  thread, which is exactly what breaks math-verify's SIGALRM timeout in reward threads:
  huggingface/Math-Verify#50, #55; huggingface/trl#5281). Workers are checked out under a lock,
  so several threads can call :meth:`ProcessPool.run` at once without mixing replies.
* **Plain subprocesses, not multiprocessing.** A worker is ``python -c "...worker_main(fd)"``
  talking over a socket pair. ``fork`` of a multi-threaded trainer can deadlock the child on a
  lock another thread held; multiprocessing's ``spawn``/``forkserver`` re-run the caller's main
  script in every child, which breaks (or re-runs training in) any script without an
  ``if __name__ == "__main__"`` guard, and the forkserver's preload list is process-global.
  A fresh interpreter has none of these problems; it costs about a second to start, paid once
  per worker and, after a kill, in the background while the other workers carry on.
* **Deadline.** A call's deadline counts from the moment it is handed to a worker, so calls
  queued behind others are not charged for waiting. Worker start-up is not charged either.
* **Memory.** ``memory_limit_mb`` caps each worker's address space (``RLIMIT_AS``), so an answer
  such as ``10^{10^{10}}`` ends in a ``MemoryError`` inside the worker instead of swapping the
  machine.
* **Exit and fork.** Workers ignore SIGINT (the parent decides) and exit when their socket
  closes, so even a SIGKILLed parent leaves nothing behind. :meth:`ProcessPool.close` stops and
  reaps them; it is also registered with :func:`weakref.finalize`, which runs at interpreter
  exit. A pool used in a forked child notices the new pid, leaves the parent's workers alone and
  starts its own. POSIX only (the socket is handed over with ``pass_fds``).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a worker that has not said "ready" by then is broken, not slow
CPU_MARGIN_S = 5  # a call's CPU budget is its timeout plus this (see _limit_cpu)


@dataclass(frozen=True)
class Outcome:
    """What became of one call: ``ok`` (with ``value``), ``timeout``, or ``error``."""

    status: str
    value: Any = None
    error: str = ""


class WorkerStartError(RuntimeError):
    """A worker process died or hung before it was ready (broken install, memory limit)."""


def worker_main(fd: int) -> None:
    """Body of a worker process: set up from the first message, then run ``(fn, args)``
    requests until ``None`` or EOF. Started by :class:`ProcessPool`, not called by hand."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    memory_limit_mb, initializer = conn.recv()
    if memory_limit_mb:
        import resource

        limit = memory_limit_mb * 2**20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):  # the hard limit is already lower: keep it
            pass
    if initializer is not None:
        initializer()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if request is None:
            return
        fn, args, cpu_s = request
        _limit_cpu(cpu_s)
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except MemoryError:
            reply = ("error", "MemoryError: over the worker memory limit")
        except BaseException as e:  # noqa: BLE001 - anything a hostile input provokes
            reply = ("error", f"{type(e).__name__}: {str(e)[:300]}")
        try:
            conn.send(reply)
        except Exception as e:  # an unpicklable result
            conn.send(("error", f"unpicklable result: {type(e).__name__}"))


def _limit_cpu(seconds: int) -> None:
    """Let the coming call use at most ``seconds`` more CPU time (then SIGXCPU ends us).

    The parent kills a late worker long before this fires (CPU time never exceeds wall time);
    it matters when the parent itself died mid-call: a worker stuck in one long C operation
    (a huge integer power holds the GIL) would never read the EOF on its socket and would burn a
    core for minutes as an orphan.
    """
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + seconds + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        pass


class _Worker:
    __slots__ = ("proc", "conn", "ready")

    def __init__(self, proc: subprocess.Popen, conn: Connection):
        self.proc, self.conn, self.ready = proc, conn, False

    def kill(self) -> None:
        """SIGKILL and reap (a reaped child leaves no zombie)."""
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(10.0)
        except subprocess.TimeoutExpired:  # cannot happen after SIGKILL short of a kernel hang
            log.warning("worker %d did not die after SIGKILL", self.proc.pid)
        self.conn.close()


def _stop_workers(workers: list[_Worker], owner_pid: int, grace_s: float = 1.0) -> None:
    """Ask workers to exit, then kill whatever is left, and reap them all (no zombies)."""
    if os.getpid() != owner_pid:  # inherited through fork: the parent owns these processes
        return
    for w in workers:
        try:
            w.conn.send(None)
        except Exception:
            pass
    deadline = time.monotonic() + grace_s
    for w in workers:
        try:
            w.proc.wait(max(0.01, deadline - time.monotonic()))
            w.conn.close()
        except subprocess.TimeoutExpired:
            w.kill()


class _State:
    """The workers of one pool in one process; shared with the exit finalizer."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.all: list[_Worker] = []
        self.idle: list[_Worker] = []

    def shutdown(self) -> None:
        workers, self.all, self.idle = self.all, [], []
        _stop_workers(workers, self.pid)


_BOOT = "import sys; sys.path[:0] = {path!r}; from cooper.procpool import worker_main; worker_main({fd})"


class ProcessPool:
    """``size`` worker processes; :meth:`run` maps a function over argument tuples with a
    per-call hard deadline. Workers start on first use."""

    def __init__(self, size: int, *, memory_limit_mb: int | None = None,
                 initializer: Callable[[], None] | None = None):
        if size < 1:
            raise ValueError(f"a process pool needs at least 1 worker, got {size}")
        if memory_limit_mb is not None and memory_limit_mb < 256:
            raise ValueError(f"memory_limit_mb={memory_limit_mb} is too small for a Python "
                             "worker; use at least 256 (or None for no limit)")
        if os.name != "posix":
            raise RuntimeError("cooper's verifier workers need a POSIX system (Linux, macOS)")
        self.size = size
        self.memory_limit_mb = memory_limit_mb
        self._initializer = initializer
        self._cond = threading.Condition()
        self._state: _State | None = None
        self._closed = False

    # ------------------------------------------------------------ worker lifecycle

    def _spawn(self) -> _Worker:
        ours, theirs = socket.socketpair()
        try:
            # The parent's sys.path goes first so the worker imports the same cooper (a test
            # run or an editable checkout may not be on the default path).
            code = _BOOT.format(path=[p for p in sys.path if p], fd=theirs.fileno())
            proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    close_fds=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        conn.send((self.memory_limit_mb, self._initializer))
        return _Worker(proc, conn)

    def _live_state(self) -> _State:
        """The current process's workers, started on first use (call with the lock held)."""
        if self._closed:
            raise RuntimeError("this process pool is closed")
        st = self._state
        if st is None or st.pid != os.getpid():  # first use, or we are a forked child
            st = _State()
            st.all = [self._spawn() for _ in range(self.size)]
            st.idle = list(st.all)
            weakref.finalize(self, st.shutdown)
            self._state = st
        return st

    def _await_ready(self, w: _Worker) -> None:
        ok = False
        try:
            if w.conn.poll(START_TIMEOUT_S):
                ok = w.conn.recv()[0] == "ready"
        except (EOFError, OSError):
            pass
        if not ok:
            code = w.proc.poll()
            self._discard(w, replace=True)
            raise WorkerStartError(
                f"a verifier worker process failed to start (exit code {code}); check that "
                "'python -c \"import math_verify\"' works, and raise the memory limit if set")
        w.ready = True

    def _acquire(self, block: bool) -> _Worker | None:
        with self._cond:
            while True:
                st = self._live_state()
                if st.idle:  # prefer a worker that has already said "ready"
                    w = next((x for x in st.idle if x.ready or x.conn.poll(0)), st.idle[-1])
                    st.idle.remove(w)
                    break
                if not block:
                    return None
                self._cond.wait()
        if not w.ready:
            self._await_ready(w)
        return w

    def _release(self, w: _Worker) -> None:
        with self._cond:
            st = self._state
            if st is not None and w in st.all and not self._closed:
                st.idle.append(w)
                self._cond.notify()
                return
        w.kill()

    def _discard(self, w: _Worker, replace: bool) -> None:
        """Kill a worker (hung, dead, or out of step with its pipe) and start a fresh one."""
        w.kill()
        with self._cond:
            st = self._state
            if st is None or w not in st.all:
                return
            st.all.remove(w)
            if not replace or self._closed:
                return
        fresh = self._spawn()  # outside the lock: other threads keep working meanwhile
        with self._cond:
            if self._closed or self._state is not st:
                fresh.kill()
                return
            st.all.append(fresh)
            st.idle.append(fresh)
            self._cond.notify()

    def close(self) -> None:
        """Stop and reap every worker. Safe to call twice; the pool cannot be used after."""
        with self._cond:
            self._closed = True
            st, self._state = self._state, None
            self._cond.notify_all()
        if st is not None:
            st.shutdown()

    def worker_pids(self) -> list[int]:
        """Pids of the current workers (for monitoring and tests)."""
        with self._cond:
            st = self._state
            return [w.proc.pid for w in st.all] if st and st.pid == os.getpid() else []

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ calls

    def run(self, fn: Callable[..., Any], calls: Sequence[tuple], timeout_s: float) -> list[Outcome]:
        """``fn(*args)`` for each tuple in ``calls``, in parallel; one :class:`Outcome` each.

        ``fn`` must be a module-level function (it is pickled by name). A call still running
        ``timeout_s`` seconds after it reached a worker is reported as ``timeout`` and its
        worker is killed and replaced.
        """
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        results: list[Outcome | None] = [None] * len(calls)
        pending = deque(range(len(calls)))
        inflight: dict[Connection, tuple[_Worker, int, float]] = {}
        try:
            while pending or inflight:
                while pending:
                    w = self._acquire(block=not inflight)
                    if w is None:
                        break
                    i = pending.popleft()
                    try:
                        w.conn.send((fn, calls[i], math.ceil(timeout_s) + CPU_MARGIN_S))
                    except (OSError, EOFError):  # died while idle (e.g. killed from outside)
                        results[i] = Outcome("error", error="worker died before the call")
                        self._discard(w, replace=True)
                        continue
                    except Exception as e:  # the arguments do not pickle; nothing was sent
                        results[i] = Outcome("error", error=f"cannot send call: {e!r}"[:300])
                        self._release(w)
                        continue
                    inflight[w.conn] = (w, i, time.monotonic() + timeout_s)
                if not inflight:
                    continue
                first_deadline = min(d for _, _, d in inflight.values())
                ready = wait(list(inflight), max(0.0, first_deadline - time.monotonic()))
                for conn in ready:
                    w, i, _ = inflight.pop(conn)  # type: ignore[arg-type]
                    try:
                        status, value = conn.recv()  # type: ignore[union-attr]
                    except (EOFError, OSError):  # crashed: segfault, killed by the OOM killer
                        results[i] = Outcome("error", error=f"worker died (exit code "
                                                            f"{w.proc.poll()})")
                        self._discard(w, replace=True)
                        continue
                    results[i] = (Outcome("ok", value) if status == "ok"
                                  else Outcome("error", error=str(value)))
                    self._release(w)
                now = time.monotonic()
                for conn, (w, i, deadline) in list(inflight.items()):
                    if deadline <= now:
                        del inflight[conn]
                        results[i] = Outcome("timeout")
                        self._discard(w, replace=True)
        finally:
            # Interrupted (KeyboardInterrupt, WorkerStartError): a late reply would put these
            # pipes out of step with the next request, so their workers are replaced.
            for w, _, _ in inflight.values():
                self._discard(w, replace=True)
        return [r if r is not None else Outcome("error", error="not run") for r in results]

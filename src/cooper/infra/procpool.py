"""Worker processes whose calls have a hard wall-clock deadline, enforced by the parent.

Why not :class:`concurrent.futures.ProcessPoolExecutor` or :class:`multiprocessing.Pool`: neither
can stop a call that is already running. A hung task holds its worker forever
(``Future.cancel`` only cancels tasks that have not started) and killing a worker by hand breaks
the whole executor (``BrokenProcessPool``). Here every worker has its own socket; the caller
waits on the sockets of its in-flight calls with a deadline; a worker that misses its deadline
is SIGKILLed and replaced, and only that call is reported as timed out. Its user is the
verifier (:mod:`cooper.verify.verifier`: math-verify, which a hostile answer can hang); nothing
here knows what the workers run.

Design points:

* **Any thread.** Nothing here installs a signal handler in the caller's process (Python allows
  that only in the main thread, which is exactly what breaks math-verify's SIGALRM timeout in
  reward threads: huggingface/Math-Verify#50, #55; huggingface/trl#5281). Workers are checked
  out under a lock, so several threads can call :meth:`ProcessPool.run` at once.
* **A zygote, not multiprocessing.** The pool starts one fresh interpreter (``python -c``),
  the *zygote*, which runs the initializer (the verifier's imports math-verify) once and then ``fork()``\\ s a
  worker whenever the pool asks, handing it a socket. Forking the caller itself would be unsafe
  (a multi-threaded trainer's child can deadlock on a lock another thread held);
  multiprocessing's ``spawn``/``forkserver`` re-run the caller's main script in every child,
  which breaks (or re-runs training in) any script without an ``if __name__ == "__main__"``
  guard; spawning a fresh interpreter per worker costs a second or more per replacement. The
  zygote is single-threaded, so its forks are safe, and a replacement is ready in milliseconds.
* **Deadline.** A call's deadline counts from the moment it is handed to a worker, so calls
  queued behind others are not charged for waiting. A timed-out call says how much CPU time
  its worker had (``Outcome.cpu_s``): a call that computed for its whole deadline is slow
  itself; one whose worker got a fraction of it was starved by a loaded machine, and its
  caller may try it again (:mod:`cooper.verify.verifier` does).
* **Memory.** ``memory_limit_mb`` caps each worker's address space (``RLIMIT_AS``), so an answer
  that makes sympy build a gigantic number ends in a ``MemoryError`` inside the worker (or is
  killed at its deadline first) instead of swapping the machine.
* **Exit, crashes, fork.** The zygote reaps every worker it forked; when its socket to the pool
  closes (:meth:`ProcessPool.close`, interpreter exit through :func:`weakref.finalize`, or the
  caller being SIGKILLed) it kills its workers, reaps them and exits, and ``close()`` reaps the
  zygote: no zombies, no orphans. Workers and the zygote ignore SIGINT (the caller decides).
  A pool used in a forked child notices the new pid, leaves the parent's workers alone and
  starts its own. POSIX only (sockets and fds are handed over with ``pass_fds``/``SCM_RIGHTS``).
"""

from __future__ import annotations

import logging
import os
import pickle
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

from cooper.infra.zygote import PID

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a zygote or worker not ready by then is broken, not slow


@dataclass(frozen=True)
class Outcome:
    """What became of one call: ``ok`` (with ``value``), ``timeout``, or ``error``. A
    ``timeout`` carries the CPU seconds its worker used on the call (None where unknown)."""

    status: str
    value: Any = None
    error: str = ""
    cpu_s: float | None = None


def _cpu_seconds(pid: int) -> float | None:
    """A process's CPU time so far, or None (gone, or not readable here). On Linux it is read
    from the process's CPU clock (``clock_getcpuclockid``), to the microsecond; psutil's user +
    system time (elsewhere, and the fallback) is in clock ticks of 10 ms, too coarse to tell a
    starved call from a slow one under a deadline of tens of milliseconds (half of 50 ms is two
    and a half ticks)."""
    import psutil

    if sys.platform.startswith("linux"):
        import ctypes

        clock = ctypes.c_int()
        try:
            if ctypes.CDLL(None).clock_getcpuclockid(pid, ctypes.byref(clock)) == 0:
                return time.clock_gettime(clock.value)
        except (OSError, AttributeError):  # no such call in this C library, or the process ended
            pass
    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except (psutil.Error, OSError):
        return None


class WorkerStartError(RuntimeError):
    """The zygote or a worker died or hung before it was ready (broken install, memory limit)."""


# ------------------------------------------------------------------ in the caller's process

_BOOT = ("import sys; sys.path[:0] = {path!r}; from cooper.infra.zygote import zygote_main; "
         "zygote_main({fd}, {mem!r}, {init!r})")


class _Worker:
    __slots__ = ("pid", "conn", "ready")

    def __init__(self, pid: int, conn: Connection):
        self.pid, self.conn, self.ready = pid, conn, False

    def kill(self) -> None:
        """SIGKILL it; the zygote reaps it."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.conn.close()


class _State:
    """One process's zygote and workers; shared with the exit finalizer."""

    def __init__(self, zygote: subprocess.Popen, sock: socket.socket, name: str) -> None:
        self.pid = os.getpid()
        self.name = name
        self.zygote, self.sock = zygote, sock
        self.lock = threading.Lock()  # one fork request at a time on the zygote socket
        self.all: list[_Worker] = []
        self.idle: list[_Worker] = []

    def fork_worker(self) -> _Worker:
        ours, theirs = socket.socketpair()
        try:
            with self.lock:
                socket.send_fds(self.sock, [b"F"], [theirs.fileno()])
                data = b""
                while len(data) < PID.size:
                    chunk = self.sock.recv(PID.size - len(data))
                    if not chunk:
                        raise WorkerStartError(f"the {self.name} zygote process died (exit "
                                               f"code {self.zygote.poll()})")
                    data += chunk
        except OSError as e:
            ours.close()
            raise WorkerStartError(f"the {self.name} zygote process is gone ({e})") from e
        finally:
            theirs.close()
        return _Worker(PID.unpack(data)[0], Connection(ours.detach()))

    def shutdown(self) -> None:
        """Let idle workers exit, then close the zygote's socket: it kills and reaps the rest
        and exits; we reap the zygote."""
        if os.getpid() != self.pid:  # inherited through fork: the parent owns these processes
            return
        workers, self.all, self.idle = self.all, [], []
        for w in workers:
            try:
                w.conn.send(None)
            except Exception:
                pass
            w.conn.close()
        self.sock.close()
        try:
            self.zygote.wait(5.0)
        except subprocess.TimeoutExpired:
            self.zygote.kill()
            self.zygote.wait()


def _start_zygote(memory_limit_mb: int | None, initializer: Callable[[], None] | None,
                  name: str, start_hint: str) -> _State:
    ours, theirs = socket.socketpair()
    init = pickle.dumps(initializer).hex() if initializer is not None else ""
    # The caller's sys.path goes first so the zygote imports the same cooper (a test run or an
    # editable checkout may not be on the default path).
    code = _BOOT.format(path=[p for p in sys.path if p], fd=theirs.fileno(),
                        mem=memory_limit_mb, init=init)
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    ours.settimeout(START_TIMEOUT_S)
    try:
        ready = ours.recv(PID.size)
    except OSError:
        ready = b""
    ours.settimeout(None)
    if len(ready) != PID.size:
        ours.close()
        proc.kill()
        code = proc.wait()
        raise WorkerStartError(f"the {name} zygote process failed to start (exit code {code})"
                               + (f"; {start_hint}" if start_hint else ""))
    return _State(proc, ours, name)


class ProcessPool:
    """``size`` worker processes; :meth:`run` maps a function over argument tuples with a
    per-call hard deadline. Processes start on first use. ``name`` says whose processes they
    are in errors and logs ("the verifier zygote process ..."), and ``start_hint`` what to
    check when the zygote cannot start (its initializer failing, typically)."""

    def __init__(self, size: int, *, memory_limit_mb: int | None = None,
                 initializer: Callable[[], None] | None = None, name: str = "process pool",
                 start_hint: str = ""):
        if size < 1:
            raise ValueError(f"a process pool needs at least 1 worker, got {size}")
        if memory_limit_mb is not None and memory_limit_mb < 256:
            raise ValueError(f"memory_limit_mb={memory_limit_mb} is too small for a Python "
                             "worker; use at least 256 (or None for no limit)")
        if os.name != "posix":
            raise RuntimeError(f"cooper's {name} workers need a POSIX system (Linux, macOS)")
        self.size = size
        self.name, self.start_hint = name, start_hint
        self.memory_limit_mb = memory_limit_mb
        self._initializer = initializer
        self._cond = threading.Condition()
        self._state: _State | None = None
        self._closed = False

    # ------------------------------------------------------------ worker lifecycle

    def _live_state(self) -> _State:
        """The current process's zygote and workers, started on first use (lock held)."""
        if self._closed:
            raise RuntimeError("this process pool is closed")
        st = self._state
        if st is None or st.pid != os.getpid():  # first use, or we are a forked child
            st = _start_zygote(self.memory_limit_mb, self._initializer, self.name,
                               self.start_hint)
            weakref.finalize(self, st.shutdown)
            st.all = [st.fork_worker() for _ in range(self.size)]
            st.idle = list(st.all)
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
            self._discard(w, replace=True)
            raise WorkerStartError(f"a {self.name} worker process died before it was ready; "
                                   "raise the memory limit if one is set")
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
        """Kill a worker (hung, dead, or out of step with its socket) and fork a fresh one."""
        w.kill()
        with self._cond:
            st = self._state
            if st is None or w not in st.all:
                return
            st.all.remove(w)
            if not replace or self._closed:
                return
            try:
                fresh = st.fork_worker()  # milliseconds: the zygote is already initialised
            except WorkerStartError:  # the zygote died: start over on the next call
                log.warning("%s zygote died; restarting the worker pool", self.name)
                self._state = None
                st.shutdown()
                self._cond.notify_all()
                return
            st.all.append(fresh)
            st.idle.append(fresh)
            self._cond.notify()

    def start(self) -> None:
        """Start the zygote and every worker now and wait until they are ready, instead of on
        the first call (which would otherwise pay the ~1-3 s start-up)."""
        workers = [self._acquire(block=True) for _ in range(self.size)]
        for w in workers:
            if w is not None:
                self._release(w)

    def close(self) -> None:
        """Stop and reap every process. Safe to call twice; the pool cannot be used after."""
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
            return [w.pid for w in st.all] if st and st.pid == os.getpid() else []

    def zygote_pid(self) -> int | None:
        with self._cond:
            st = self._state
            return st.zygote.pid if st and st.pid == os.getpid() else None

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ calls

    def run(self, fn: Callable[..., Any], calls: Sequence[tuple], timeout_s: float) -> list[Outcome]:
        """``fn(*args)`` for each tuple in ``calls``, in parallel; one :class:`Outcome` each.

        ``fn`` must be a module-level function (it is pickled by name). A call still running
        ``timeout_s`` seconds after it reached a worker is reported as ``timeout``, with the
        CPU seconds its worker had meanwhile, and its worker is killed and replaced.
        """
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        results: list[Outcome | None] = [None] * len(calls)
        pending = deque(range(len(calls)))
        # connection -> (worker, call index, deadline, the worker's CPU seconds at hand-off)
        inflight: dict[Connection, tuple[_Worker, int, float, float | None]] = {}
        try:
            while pending or inflight:
                while pending:
                    w = self._acquire(block=not inflight)
                    if w is None:
                        break
                    i = pending.popleft()
                    try:
                        w.conn.send((fn, calls[i]))
                    except (OSError, EOFError):  # died while idle (e.g. killed from outside)
                        results[i] = Outcome("error", error="worker died before the call")
                        self._discard(w, replace=True)
                        continue
                    except Exception as e:  # the arguments do not pickle; nothing was sent
                        results[i] = Outcome("error", error=f"cannot send call: {e!r}"[:300])
                        self._release(w)
                        continue
                    inflight[w.conn] = (w, i, time.monotonic() + timeout_s, _cpu_seconds(w.pid))
                if not inflight:
                    continue
                first_deadline = min(d for _, _, d, _ in inflight.values())
                ready = wait(list(inflight), max(0.0, first_deadline - time.monotonic()))
                for conn in ready:
                    w, i, _, _ = inflight.pop(conn)  # type: ignore[arg-type]
                    try:
                        status, value = conn.recv()  # type: ignore[union-attr]
                    except (EOFError, OSError):  # crashed: segfault, killed by the OOM killer
                        results[i] = Outcome("error", error="worker process died")
                        self._discard(w, replace=True)
                        continue
                    results[i] = (Outcome("ok", value) if status == "ok"
                                  else Outcome("error", error=str(value)))
                    self._release(w)
                now = time.monotonic()
                for conn, (w, i, deadline, cpu0) in list(inflight.items()):
                    if deadline <= now:
                        del inflight[conn]
                        cpu1 = _cpu_seconds(w.pid)
                        used = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
                        results[i] = Outcome("timeout", cpu_s=used)
                        self._discard(w, replace=True)
        finally:
            # Interrupted (KeyboardInterrupt, WorkerStartError): a late reply would put these
            # sockets out of step with the next request, so their workers are replaced.
            for w, _, _, _ in inflight.values():
                self._discard(w, replace=True)
        return [r if r is not None else Outcome("error", error="not run") for r in results]

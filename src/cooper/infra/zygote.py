"""What runs inside a process pool's processes: the zygote and the workers it forks.

The zygote (:func:`zygote_main`) is a fresh interpreter started by
:class:`cooper.infra.procpool.ProcessPool` with ``python -c``. It runs the pool's initializer
once (for the verifier: import math-verify and warm it up), then waits on its socket to the pool.
Each request is one byte plus a socket fd (``SCM_RIGHTS``); the zygote forks, the child becomes
a worker on that socket (:func:`_worker_loop`), and the zygote answers with the child's pid.
The zygote is single-threaded, so forking it is safe, and every worker inherits what the
initializer loaded (the verifier's: a warm math-verify) for free. It reaps its workers every
half second, and when its socket to the pool closes it SIGKILLs and reaps the rest and exits,
so the pool's owner dying leaves nothing behind.

A worker reads ``(fn, args)`` requests and answers ``("ok", result)`` or ``("error", text)``
until it reads ``None`` or its socket closes. Exceptions never escape: a hostile input can only
make a worker slow (the pool kills it at the deadline), out of memory (``RLIMIT_AS``), or dead.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import struct
import traceback
from multiprocessing.connection import Connection
from typing import Any

PID = struct.Struct("q")  # the zygote's replies: its own pid when ready, then each worker's


def _worker_loop(fd: int, memory_limit_mb: int | None) -> None:
    """A forked worker: run ``(fn, args)`` requests until ``None`` or EOF."""
    if memory_limit_mb:
        import resource

        limit = memory_limit_mb * 2**20
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):  # the hard limit is already lower: keep it
            pass
    conn = Connection(fd)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the pool is gone
            return
        if request is None:
            return
        fn, args = request
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


def zygote_main(fd: int, memory_limit_mb: int | None, initializer_hex: str) -> None:
    """The zygote process: initialise once, then fork a worker per request (one byte plus the
    worker's socket fd in); reply with its pid. Started by :class:`ProcessPool`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    if initializer_hex:
        pickle.loads(bytes.fromhex(initializer_hex))()
    sock.sendall(PID.pack(os.getpid()))  # ready
    children: set[int] = set()
    try:
        while True:
            readable, _, _ = select.select([sock], [], [], 0.5)
            _reap(children)
            if not readable:
                continue
            msg, fds, _, _ = socket.recv_fds(sock, 1, 1)
            if not msg:  # EOF: the pool closed or its process died
                return
            if not fds:
                continue
            pid = os.fork()
            if pid == 0:
                sock.close()
                code = 0
                try:
                    _worker_loop(fds[0], memory_limit_mb)
                except BaseException:  # noqa: BLE001
                    traceback.print_exc()
                    code = 1
                finally:
                    os._exit(code)  # never run the zygote's own cleanup in a worker
            os.close(fds[0])
            children.add(pid)
            sock.sendall(PID.pack(pid))
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _reap(children: set[int]) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)

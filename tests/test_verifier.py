"""The verifier with real math-verify in real worker processes: verdicts, fast path agreement,
hostile input, threads, several processes, and clean shutdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli_env
from cooper.verify.verifier import REASONS, Verdict, Verifier, equivalent, fast_equivalent

TIMEOUT = 1.0
SLACK = 1.0  # acceptance: an item returns within timeout + 1 s


def retry_allowance(verifier, retries_before: int, rounds: int = 1) -> float:
    """The time a loaded machine may add: a worker starved of CPU (another process on its
    core) is retried once with RETRY_FACTOR times the deadline. 0 on an idle machine."""
    from cooper.verify.verifier import RETRY_FACTOR

    return RETRY_FACTOR * TIMEOUT * rounds if verifier.stats.retries > retries_before else 0.0
# Each of these keeps math-verify busy for minutes (or forever) with its own timeouts off.
HANGS = [r"\boxed{9^{9^{9^{9}}}}", r"\boxed{(10^{10})!}", r"\boxed{10^{10^{10}}}"]


@pytest.fixture(scope="module")
def verifier():
    with Verifier(workers=2) as v:
        yield v


def _gone(pid: int) -> bool:
    """No such process, not even a zombie."""
    try:
        psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    return False


# ------------------------------------------------------------------ verdicts

@pytest.mark.parametrize("completion, reference, mode, expected", [
    (r"so $x = \frac12$, i.e. \boxed{\frac{1}{2}}", "0.5", "strict", (True, r"\frac{1}{2}", "correct")),
    (r"\boxed{\frac{2}{4}}", r"\frac{1}{2}", "strict", (True, r"\frac{2}{4}", "correct")),
    ("He pays 3 * 24 = <<3*24=72>>72.\n#### 72", "72", "strict", (True, "72", "correct")),
    ("The answer is 145.", "145.0", "strict", (True, "145", "correct")),          # SVAMP float
    ("The answer is $1,000.", "1000", "strict", (True, "$1,000", "correct")),
    (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)", "strict",
     (True, r"\left( 3, \frac{\pi}{2} \right)", "correct")),
    (r"\boxed{(3, \pi/2)}", r"\left( 3, \frac{\pi}{2} \right)", "strict",
     (True, r"(3, \pi/2)", "correct")),
    (r"\boxed{x^2+2x+1}", "(x+1)^2", "strict", (True, "x^2+2x+1", "correct")),
    ("The answer is 73", "72", "strict", (False, "73", "wrong")),
    (r"\boxed{\frac{1}{3}}", "0.5", "strict", (False, r"\frac{1}{3}", "wrong")),
    ("I think it is 72", "72", "strict", (False, None, "no_answer")),
    ("I think it is 72", "72", "lenient", (True, "72", "correct")),
    ("#### 72", "", "strict", (False, "72", "error")),                           # no reference
])
def test_verdicts(verifier, completion, reference, mode, expected):
    v = verifier.verify(completion, reference, mode=mode)
    assert (v.correct, v.extracted, v.reason) == expected
    assert v.reason in REASONS


def test_gsm8k_worked_solution_as_reference(verifier):
    """A GSM8K reference may be passed as the whole worked solution."""
    assert verifier.verify(r"\boxed{18}", "Janet sells 16 - 3 - 4 = 9 eggs.\n#### 18").correct


def test_batch_dedupes_and_caches(verifier):
    before = verifier.stats.as_dict()
    completions = [r"\boxed{\sqrt{2}/2}"] * 6 + [r"\boxed{1/\sqrt{2}}"] * 2
    out = verifier.verify_batch(completions, [r"\frac{\sqrt{2}}{2}"] * 8)
    assert all(v.correct for v in out)
    mid = verifier.stats.as_dict()
    assert mid["worker_checks"] - before["worker_checks"] == 2  # two distinct answers
    again = verifier.verify(r"\boxed{\sqrt{2}/2}", r"\frac{\sqrt{2}}{2}")
    assert again.correct and verifier.stats.cache_hits == mid["cache_hits"] + 1
    assert verifier.stats.worker_checks == mid["worker_checks"]


def test_batch_argument_errors(verifier):
    with pytest.raises(ValueError, match="2 completions but 1 references"):
        verifier.verify_batch(["a", "b"], ["1"])
    with pytest.raises(ValueError, match="mode"):
        verifier.verify("a", "1", mode="fuzzy")
    with pytest.raises(ValueError, match="timeout_s"):
        verifier.verify("a", "1", timeout_s=0)


def test_chat_message_completions(verifier):
    """TRL passes conversational completions as message lists."""
    msgs = [{"role": "assistant", "content": r"so \boxed{4}"}]
    assert verifier.verify(msgs, "4").correct


def test_completion_text_is_what_the_policy_wrote():
    """One definition for the verifier and the reward model: the assistant messages' text,
    joined in order (before, the trainer joined every message and the verifier took the last)."""
    from cooper.verify.verifier import completion_text

    turns = [{"role": "assistant", "content": "2 + 2 = 4. "},
             {"role": "tool", "content": r"calculator: \boxed{5}"},
             {"role": "assistant", "content": [{"type": "text", "text": r"So \boxed{4}"}]}]
    # the policy's two turns, not the tool's box (joining all would read 5 as its answer)
    assert completion_text(turns) == r"2 + 2 = 4. So \boxed{4}"
    assert completion_text([{"content": "no role"}]) == "no role"
    assert completion_text([]) == "" and completion_text(None) == ""


# ------------------------------------------------------------------ fast path = math-verify

_ints = st.integers(-10**12, 10**12)
_decimals = st.decimals(min_value=-10**6, max_value=10**6, places=3, allow_nan=False,
                        allow_infinity=False)


def _forms(x: int) -> st.SearchStrategy[str]:
    return st.sampled_from([str(x), f"{x}.0", f"{x}.00", f"0{x}" if x >= 0 else str(x)])


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_fast_path_agrees_with_math_verify(data):
    """Where the fast path decides, math-verify (run directly, in-process) decides the same."""
    kind = data.draw(st.sampled_from(["int", "near", "decimal"]))
    if kind == "int":
        x = data.draw(_ints)
        a, b = data.draw(_forms(x)), data.draw(_forms(data.draw(st.sampled_from([x, x + 1, -x]))))
    elif kind == "near":
        x = data.draw(st.integers(0, 10**6))
        d = data.draw(st.integers(0, 999_999))
        a, b = f"{x}.{d:06d}", data.draw(st.sampled_from([f"{x}.{d:06d}", f"{x}.{(d + 1) % 10**6:06d}",
                                                          f"{x}.{d:06d}".rstrip("0") or "0"]))
    else:
        a = str(data.draw(_decimals))
        b = data.draw(st.sampled_from([a, a + "0", str(data.draw(_decimals))]))
    fast = fast_equivalent(a, b)
    if kind == "int":  # plain integers of at most 15 digits: the fast path must decide them
        assert fast is not None, (a, b)
    if fast is not None:
        assert fast == equivalent(b, a), (a, b)


# ------------------------------------------------------------------ hostile input

HOSTILE = [
    None, "", "   ", b"\xff\xfe\xfa invalid utf-8 \\boxed{3}", "\ud800 lone surrogate \\boxed{3}",
    "x" * 1_000_000 + r"\boxed{3}",                       # 1 MB completion
    r"\boxed{" + "{" * 500_000,                          # unbalanced braces
    r"\boxed{" + r"\frac{1}{" * 400 + "2" + "}" * 401,   # deeply nested LaTeX
    r"\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
    r"\boxed{\left(\left(\left(}", r"\boxed{}}}}", r"\boxed{1/0}", r"\boxed{\frac{1}{0}}",
    r"\boxed{10000000!}", r"\boxed{2^{2^{2^{2^{2^{2}}}}}}", *HANGS,
    "answer: " + "9" * 100_000,
]


@pytest.mark.parametrize("completion", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_never_hangs_or_crashes(verifier, completion):
    r0 = verifier.stats.retries
    t0 = time.perf_counter()
    v = verifier.verify(completion, "3", timeout_s=TIMEOUT)
    took = time.perf_counter() - t0
    assert isinstance(v, Verdict) and v.reason in REASONS
    assert took <= TIMEOUT + SLACK + retry_allowance(verifier, r0), f"{took:.2f} s"
    if isinstance(completion, str | bytes) and r"\boxed{3}" in str(completion):
        assert v.correct  # the real answer survives the garbage around it
    elif v.reason == "timeout":
        assert not v.correct


def test_hostile_batch_is_bounded(verifier):
    """A batch of hangs and normal items: each hang costs one timeout, normal items survive."""
    completions = HANGS + [r"\boxed{3}", r"\boxed{4}"]
    r0 = verifier.stats.retries
    t0 = time.perf_counter()
    out = verifier.verify_batch(completions, ["3"] * len(completions), timeout_s=TIMEOUT)
    took = time.perf_counter() - t0
    assert [v.reason for v in out] == ["timeout"] * 3 + ["correct", "wrong"]
    # 3 hangs on 2 workers: two rounds of one timeout each, plus a worker restart
    bound = 2 * TIMEOUT + 2 * SLACK + 2 + retry_allowance(verifier, r0, rounds=2)
    assert took <= bound, f"{took:.2f} s"


# ------------------------------------------------------------------ threads and processes

def test_pathological_item_from_a_non_main_thread(verifier):
    """math-verify's own SIGALRM timeout cannot work here (signals are main-thread only)."""
    r0 = verifier.stats.retries
    with ThreadPoolExecutor(1) as ex:
        t0 = time.perf_counter()
        v = ex.submit(verifier.verify, HANGS[0], "1", timeout_s=TIMEOUT).result(timeout=30)
        took = time.perf_counter() - t0
    assert threading.current_thread() is threading.main_thread()
    assert v.reason == "timeout" and not v.correct
    assert took <= TIMEOUT + SLACK + retry_allowance(verifier, r0)


def test_many_threads_share_one_verifier(verifier):
    refs = [str(n) for n in range(40)]
    comps = [rf"\boxed{{{n}/1}}" if n % 2 else rf"\boxed{{{n + 1}/1}}" for n in range(40)]
    with ThreadPoolExecutor(4) as ex:
        futures = [ex.submit(verifier.verify_batch, comps[k::4], refs[k::4]) for k in range(4)]
        futures.append(ex.submit(verifier.verify, HANGS[1], "1", timeout_s=TIMEOUT))
        results = [f.result(timeout=60) for f in futures]
    for k in range(4):
        got = [v.correct for v in results[k]]
        assert got == [n % 2 == 1 for n in range(k, 40, 4)]
    assert results[4].reason == "timeout"


SCRIPT = textwrap.dedent(r"""
    import json, sys, time
    from cooper.verify.verifier import Verifier
    v = Verifier(workers=2)
    comps = [r"\boxed{\frac{%d}{2}}" % n for n in range(30)] + [r"\boxed{9^{9^{9^{9}}}}"]
    refs = [str(n / 2) for n in range(30)] + ["1"]
    t0 = time.perf_counter()
    out = v.verify_batch(comps, refs, timeout_s=3.0)  # headroom: the machine may be loaded
    print(json.dumps({"reasons": [o.reason for o in out], "s": time.perf_counter() - t0,
                      "pids": v.worker_pids() + [v._pool.zygote_pid()]}))
""")


def test_two_processes_verify_at_once():
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=cli_env())
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    pids = []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        res = json.loads(out.strip().splitlines()[-1])
        assert res["reasons"] == ["correct"] * 30 + ["timeout"]
        pids += res["pids"]
    assert len(set(pids)) == 6  # each process had its own pool
    time.sleep(0.5)
    assert all(_gone(pid) for pid in pids)  # and left no worker behind at exit


# ------------------------------------------------------------------ lifecycle

def test_close_reaps_every_worker():
    v = Verifier(workers=2)
    assert v.worker_pids() == []  # lazy: nothing started yet
    assert v.verify(HANGS[0], "1", timeout_s=0.5).reason == "timeout"  # one kill + restart
    pids = v.worker_pids()
    assert len(pids) == 2
    zygote = v._pool.zygote_pid()
    me = psutil.Process()
    assert {c.pid for c in me.children(recursive=True)} >= {*pids, zygote}
    v.close()
    assert all(_gone(pid) for pid in [*pids, zygote])  # reaped, not zombies
    with pytest.raises(RuntimeError, match="closed"):
        v.verify(r"\boxed{x+1}", "1+x")


def test_worker_killed_from_outside_is_replaced(verifier):
    assert verifier.verify(r"\boxed{x+y}", "y+x").correct  # workers up
    victim = verifier.worker_pids()[0]
    os.kill(victim, 9)
    time.sleep(0.2)
    outs = [verifier.verify(rf"\boxed{{{n}+x}}", f"x+{n}") for n in range(4)]
    # At most the item sent to the dead worker is an error; the rest go through.
    assert sum(o.reason == "error" for o in outs) <= 1
    assert sum(o.correct for o in outs) >= 3
    assert victim not in verifier.worker_pids()


def test_forked_child_gets_its_own_workers():
    script = textwrap.dedent(r"""
        import os, sys
        from cooper.verify.verifier import Verifier
        v = Verifier(workers=1)
        assert v.verify(r"\boxed{x+1}", "1+x").correct
        parent_pids = v.worker_pids()
        pid = os.fork()
        if pid == 0:
            ok = v.verify(r"\boxed{x+2}", "2+x").correct and v.worker_pids() != parent_pids
            v.close()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "child failed"
        assert v.worker_pids() == parent_pids and v.verify(r"\boxed{x+3}", "3+x").correct
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=cli_env(), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# ------------------------------------------------------------------ load

def test_a_loaded_machine_gives_the_same_verdicts_as_an_idle_one():
    """Busy processes on every core starve the verifier's workers; a check that missed its
    deadline that way is retried with a longer one, so the verdicts are those of an idle
    machine, not timeouts (and a hostile answer still times out, once)."""
    comps = [rf"\boxed{{\frac{{{n}}}{{4}}}}" for n in range(24)] + [HANGS[0]]
    refs = [str(n / 4) if n % 3 else str(n / 4 + 1) for n in range(24)] + ["1"]
    with Verifier(workers=2) as idle:
        expected = [v.reason for v in idle.verify_batch(comps, refs, timeout_s=1.0)]
    assert expected[-1] == "timeout" and set(expected[:-1]) == {"correct", "wrong"}
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(3 * (os.cpu_count() or 1))]
    runs = []  # (verdicts, stats) of each loaded batch
    try:
        time.sleep(0.5)
        # whether a check is starved is the scheduler's call: up to three batches for the premise
        for _ in range(3):
            with Verifier(workers=2) as loaded:
                loaded.start()  # the workers' start is not what this measures
                # a deadline far under what a starved worker needs for one parse
                runs.append(([v.reason for v in loaded.verify_batch(
                    comps, refs, timeout_s=0.05, retry_timeout_s=5.0)], loaded.stats))
            if runs[-1][1].retries:
                break
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert all(got == expected for got, _ in runs)
    assert runs[-1][1].retries >= 1, (f"no check was starved in {len(runs)} batches: the load "
                                      "did not show (premise)")

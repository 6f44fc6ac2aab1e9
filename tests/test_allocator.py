"""malloc keeps freed memory: a step's second large allocation is served without page faults;
oneDNN's primitive caches are bounded."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from conftest import cli_env
from cooper.infra.allocator import ONEDNN_CACHES, is_glibc

pytestmark = pytest.mark.skipif(not is_glibc(), reason="the tuning is glibc's; elsewhere it "
                                "does nothing")

# Free 320 MiB (as a training step frees its activations), then count the minor page faults of
# allocating and filling 256 MiB, which fits in what was freed. torch's worker threads start
# first: they allocate small blocks of their own, which could otherwise land in the gap.
PROBE = """
import resource, torch
from cooper.infra.allocator import keep_freed_memory
print(keep_freed_memory())
torch.ones(1 << 20).sum()
x = torch.ones(80 << 20); del x
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
x = torch.ones(64 << 20)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = (256 << 20) // 4096  # 65,536 pages of 4 KiB


def probe(**env: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=cli_env(**env), timeout=120, check=True).stdout.split()
    return out[0] == "True", int(out[1])


def test_freed_memory_is_reused_without_page_faults():
    done, faults = probe()
    assert done
    assert faults < PAGES // 10, f"{faults} page faults for a block that was just freed"


def test_opting_out_leaves_malloc_as_it_is():
    # the control: glibc's default unmaps the freed block, so the second one faults in anew
    done, faults = probe(COOPER_KEEP_FREED_MEMORY="0")
    assert not done
    assert faults > PAGES // 2


# A stage frees 320 MiB of activations under the tuning (kept, so still resident; a small block
# allocated after them keeps the heap's top from being the free part), then the next stage starts
RELEASE = """
import torch
from cooper.infra.allocator import keep_freed_memory, release_freed_memory

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10

keep_freed_memory()
xs = [torch.ones(1 << 20) for _ in range(80)]
pin = torch.ones(16)
del xs
before = rss()
print(release_freed_memory() if RELEASE else False, before - rss())
"""


@pytest.mark.parametrize("release", [True, False])
def test_a_finished_stage_hands_its_freed_memory_back(release):
    out = subprocess.run([sys.executable, "-c", f"RELEASE = {release}\n{RELEASE}"],
                         capture_output=True, text=True, env=cli_env(), timeout=120,
                         check=True).stdout.split()
    released, freed = out[0] == "True", int(out[1])
    if release:  # what the demo does between its stages
        assert released and freed > (256 << 20), f"only {freed >> 20} MiB handed back"
    else:  # the control: kept, as the tuning keeps it between steps
        assert not released and freed < (64 << 20)


def test_the_cooper_command_applies_it(monkeypatch, tmp_path):
    import cooper.cli

    calls = []
    monkeypatch.setattr(cooper.cli, "keep_freed_memory", lambda: calls.append(1))
    monkeypatch.setenv("COOPER_CACHE", str(tmp_path))
    assert cooper.cli.main(["models", "list"]) == 0
    assert calls == [1]


def test_a_misspelt_setting_is_a_clear_error_not_a_silent_choice():
    from conftest import run_cli

    proc = run_cli("models", "list", check=False, env=cli_env(COOPER_KEEP_FREED_MEMORY="of"))
    assert proc.returncode == 2
    assert "COOPER_KEEP_FREED_MEMORY='of'" in proc.stderr and "use 1" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("name,value", [("LRU_CACHE_CAPACITY", "0"),
                                        ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "lots"),
                                        ("LRU_CACHE_CAPACITY", "-5")])
def test_a_cache_setting_that_is_not_a_count_is_a_clear_error(name, value):
    from conftest import run_cli

    proc = run_cli("models", "list", check=False, env=cli_env(**{name: value}))
    assert proc.returncode == 2
    assert f"{name}={value!r}" in proc.stderr and "whole number" in proc.stderr
    assert "Traceback" not in proc.stderr


# Products of 400 distinct shapes through oneDNN (the forward of an embedded-model layer at 400
# batch lengths, as RL's batches give), then the memory still resident once malloc has handed
# back what is free: what oneDNN's caches hold
CACHES = """
import ctypes, os, torch
from cooper.infra.allocator import bound_onednn_caches
if BOUND:
    print(bound_onednn_caches())
libc = ctypes.CDLL("libc.so.6")

def rss():
    libc.malloc_trim(0)
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

op = torch.ops.mkldnn._linear_pointwise
w, x = torch.randn(1536, 576), torch.randn(800, 576)
op(x[:300], w, None, "none", [], "")
before = rss()
for n in range(400, 800):
    op(x[:n], w, None, "none", [], "")
print(rss() - before)
"""


def cached_bytes(bound: bool, **settings: str) -> tuple[str, int]:
    env = cli_env(**settings)
    for name in ONEDNN_CACHES:  # set in this process by a test that ran `cooper` in it
        if name not in settings:
            env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", f"BOUND = {bound}\n{CACHES}"],
                         capture_output=True, text=True, env=env, timeout=300,
                         check=True).stdout.splitlines()
    return out[0] if bound else "", int(out[-1])


@pytest.mark.skipif(not (torch.backends.mkldnn.is_available()
                         and hasattr(torch.ops.mkldnn, "_linear_pointwise")),
                    reason="this PyTorch build has no oneDNN linear operator")
def test_onednn_caches_are_bounded_unless_the_user_set_them():
    settings, bounded = cached_bytes(True)
    assert "'ONEDNN_PRIMITIVE_CACHE_CAPACITY': '128'" in settings
    assert "'LRU_CACHE_CAPACITY': '128'" in settings
    _, unbounded = cached_bytes(False)  # the control: oneDNN's defaults (1024 entries each)
    assert unbounded > 2 * bounded + (32 << 20), (
        f"400 shapes held {unbounded >> 20} MiB unbounded and {bounded >> 20} MiB bounded")
    # a user's setting wins: the caches then hold what they held unbounded
    settings, kept = cached_bytes(True, ONEDNN_PRIMITIVE_CACHE_CAPACITY="1024",
                                  LRU_CACHE_CAPACITY="1024")
    assert "'LRU_CACHE_CAPACITY': '1024'" in settings
    assert kept > 2 * bounded + (32 << 20)


def test_the_cooper_command_bounds_the_onednn_caches(monkeypatch, tmp_path):
    import cooper.cli

    for name in ONEDNN_CACHES:  # set then unset, so that the test leaves the environment as it was
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    monkeypatch.setenv("COOPER_CACHE", str(tmp_path))
    assert cooper.cli.main(["models", "list"]) == 0
    assert {name: os.environ.get(name) for name in ONEDNN_CACHES} == dict.fromkeys(
        ONEDNN_CACHES, "128")

"""malloc keeps freed memory: a step's second large allocation is served without page faults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import cli_env
from cooper.infra.allocator import is_glibc

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

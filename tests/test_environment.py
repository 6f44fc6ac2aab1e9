"""The environment snapshot (cooper.infra.environment) that results, experiments and benches record."""

from __future__ import annotations

import re

import cooper
from cooper.infra.environment import PACKAGES, environment, package_versions, software_table


def test_environment_keys_and_versions(monkeypatch):
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "7")
    monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)
    env = environment((*PACKAGES, "no-such-package-cooper"))
    assert {"date", "platform", "python", "cpu", "cpu_count", "torch_threads", "cuda",
            "versions"} <= set(env)
    assert isinstance(env["cpu_bfloat16"], bool)  # what `cooper demo --dtype auto` picks by
    # which library ran float32 linear layers on the CPU (cooper.infra.cpu_linear)
    assert env["float32_matmul"] in ("onednn", "blas")
    # oneDNN's cache capacities as set (cooper.infra.allocator.bound_onednn_caches), None unset
    assert env["onednn_caches"] == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "7",
                                    "LRU_CACHE_CAPACITY": None}
    # date and time: results of one day are told apart (bench used to record the day only)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", env["date"])
    # cooper-rl is the code that ran, not whichever copy is installed
    assert env["versions"]["cooper-rl"] == cooper.__version__
    assert env["versions"]["torch"] and env["versions"]["no-such-package-cooper"] is None


def test_environment_without_hardware_has_no_device():
    env = environment(hardware=False)
    assert set(env) == {"date", "platform", "python", "versions"}
    assert list(env["versions"]) == list(PACKAGES)


def test_software_table_is_flat_and_lists_installed_packages():
    env = environment((*PACKAGES, "no-such-package-cooper"))
    table = software_table(env)
    assert list(table)[:2] == ["cooper-rl", "python"] and list(table)[-1] == "device"
    assert "no-such-package-cooper" not in table
    assert table["device"].startswith(("cpu (", "cuda ("))
    if not env["cuda"]:
        assert table["device"].endswith(f"float32 matmul: {env['float32_matmul']})")
    assert all(isinstance(v, str) for v in table.values())
    assert package_versions(("cooper-rl",)) == {"cooper-rl": cooper.__version__}


def test_cpuinfo_reads_a_field_by_its_whole_name(tmp_path, monkeypatch):
    from cooper.infra import cpuinfo as cpuinfo_module
    from cooper.infra import environment as env_module

    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
                    "model\t\t: 1\n")
    monkeypatch.setattr(cpuinfo_module, "CPUINFO", fake)
    assert cpuinfo_module.cpuinfo("vendor_id") == "AuthenticAMD"
    # "model" is a prefix of "model name": each must read its own line
    assert cpuinfo_module.cpuinfo("model name") == "AMD EPYC 7B13"
    assert cpuinfo_module.cpuinfo("model") == "1"
    assert cpuinfo_module.cpuinfo("flags") == ""
    assert env_module._cpu_model() == "AMD EPYC 7B13"
    # a line without a colon is no field; bytes that are not UTF-8 do not stop the reading
    fake.write_bytes(b"vendor_id\nmodel name\t: Caf\xe9 CPU\nvendor_id\t: AuthenticAMD\n")
    assert cpuinfo_module.cpuinfo("vendor_id") == "AuthenticAMD"
    assert cpuinfo_module.cpuinfo("model name") == "Caf\ufffd CPU"
    # no such file (not Linux): nothing, and the model falls back on the platform module's
    monkeypatch.setattr(cpuinfo_module, "CPUINFO", tmp_path / "absent")
    assert cpuinfo_module.cpuinfo("vendor_id") == ""
    assert env_module._cpu_model()

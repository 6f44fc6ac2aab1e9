"""The CPU's identity as Linux reports it in /proc/cpuinfo.

Its own module because both the run's environment record (the CPU's model) and the choice of
float32 matrix backend (its vendor) read it, and the second is imported by the first."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpuinfo(field: str) -> str:
    """The first value of FIELD in :data:`CPUINFO` ("vendor_id", "model name", ...), or "" where
    there is no such file (not Linux) or field. A line without a colon is no field, and bytes
    that are not UTF-8 are replaced: a CPU's identity is a label, never worth a crash."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        if colon and name.strip() == field:
            return value.strip()
    return ""

"""The CPU's identity as Linux reports it in /proc/cpuinfo.

Its own module because both the run's environment record (the CPU's model) and the choice of
float32 matrix backend (its vendor) read it, and the second is imported by the first."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpuinfo(field: str) -> str:
    """The first value of FIELD in :data:`CPUINFO` ("vendor_id", "model name", ...), or "" where
    there is no such file (not Linux) or field."""
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.split(":", 1)[0].strip() == field:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""

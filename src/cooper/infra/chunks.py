"""Long jobs written as committed parquet parts, so a crash loses at most the part in flight.

A job that writes ``OUT.parquet`` keeps its progress in the folder ``OUT.parquet.parts/``:
each finished chunk of rows is written to a temporary file, flushed to disk and renamed to
``part-NNNNN.parquet`` (:mod:`cooper.infra.files`: a part is either complete or absent). When the
job ends, the parts are assembled into the output file(s) the same way (temporary file,
rename) and the folder is removed; a job may route rows to several files (labelling writes
kept and dropped rows apart). A rerun reads the output files and any parts, and a row of a
later part replaces an earlier row with the same key: that is how a retried failed row
supersedes its failure. Leftover temporary files of a killed run are ignored and removed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cooper.errors import UserError
from cooper.infra.files import atomic_open, remove_temp_files

Row = dict[str, Any]


def write_table(table: pa.Table, path: Path) -> None:
    """Write a parquet file so that ``path`` is either the whole table or untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "wb") as f:
        pq.write_table(table, f)


class ChunkStore:
    """Rows keyed by ``key_fields``, committed in parts next to ``out`` (see module)."""

    def __init__(self, out: str | os.PathLike, schema: pa.Schema, key_fields: Sequence[str],
                 extra_outputs: Sequence[str | os.PathLike] = ()):
        self.out = Path(out)
        if self.out.suffix.lower() != ".parquet":
            raise UserError(f"output must be a .parquet file, got '{self.out}'")
        self.outputs = [self.out, *map(Path, extra_outputs)]
        for path in self.outputs:
            if path.exists() and not path.is_file():
                raise UserError(f"output {path} exists and is not a file")
        self.schema, self.key_fields = schema, tuple(key_fields)
        self.parts_dir = self.out.with_name(self.out.name + ".parts")

    def key(self, row: Row) -> tuple:
        return tuple(row[k] for k in self.key_fields)

    def _part_paths(self) -> list[Path]:
        if not self.parts_dir.is_dir():
            return []
        remove_temp_files(self.parts_dir)  # a part that was being written when a run died
        return sorted(self.parts_dir.glob("part-*.parquet"))

    def _read(self, path: Path) -> list[Row]:
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as e:
            raise UserError(f"cannot read {path}: {e}. It was not written by this job, or the "
                            "disk lost it; move it away to start over") from e
        missing = set(self.schema.names) - set(table.column_names)
        if missing:
            raise UserError(f"{path} lacks column(s) {', '.join(sorted(missing))}: it was "
                            "written by another command or version; pick another output")
        return table.select(self.schema.names).to_pylist()

    def existing(self) -> dict[tuple, Row]:
        """Rows already committed (output files, then parts in order; later ones win)."""
        rows: dict[tuple, Row] = {}
        sources = [p for p in self.outputs if p.is_file()] + self._part_paths()
        for path in sources:
            for row in self._read(path):
                rows[self.key(row)] = row
        return rows

    def commit(self, rows: Iterable[Row]) -> Path | None:
        """Write one part atomically; returns its path (None for no rows)."""
        rows = list(rows)
        if not rows:
            return None
        paths = self._part_paths()
        n = int(paths[-1].stem.split("-")[1]) + 1 if paths else 0
        path = self.parts_dir / f"part-{n:05d}.parquet"
        write_table(pa.Table.from_pylist(rows, schema=self.schema), path)
        return path

    def finalize(self, order: Callable[[Row], Any] | None = None,
                 route: Callable[[Row], int] | None = None,
                 update: Callable[[Row], Row] | None = None) -> list[Row]:
        """Assemble every committed row into the outputs and drop the parts folder.

        ``update`` may rewrite each row first; ``route`` picks the output (index into
        ``[out, *extra_outputs]``, default 0). Each output is written atomically; every output
        is written, empty ones too, so no stale file of an earlier run survives.
        """
        rows = list(self.existing().values())
        if update is not None:
            rows = [update(r) for r in rows]
        if order is not None:
            rows.sort(key=order)
        routed: list[list[Row]] = [[] for _ in self.outputs]
        for r in rows:
            routed[route(r) if route else 0].append(r)
        for path, part in zip(self.outputs, routed, strict=True):
            write_table(pa.Table.from_pylist(part, schema=self.schema), path)
        if self.parts_dir.is_dir():
            shutil.rmtree(self.parts_dir)
        return rows

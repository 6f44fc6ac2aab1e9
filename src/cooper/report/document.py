"""A report as a list of blocks, written as ``report.md`` and as one self-contained ``report.html``.

Both reports (:mod:`cooper.report.experiment_report` for an experiment folder,
:mod:`cooper.report.run_report` for one training run) build their content once, as blocks,
and hand them here: ``("h1", text)``, ``("h2", text)``, ``("note", text)``, ``("p", text)``,
``("ul", [text, ...])``, ``("table", rows)`` (first row the header) and
``("figure", png_path, caption)``. The markdown links the PNGs beside it; the HTML embeds them as
base64, so the one file works offline. The HTML page's title is the first ``h1``.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

Block = tuple


@dataclass(frozen=True)
class ReportPaths:
    """Where a report was written."""

    folder: Path
    html: Path
    markdown: Path
    plots: list[Path]
    notice: str = ""
    """what the reader must know before opening it (no verdict yet, ...); '' for nothing"""


def report_dir(folder: Path, out: str | Path | None) -> Path:
    """The folder a report goes to (``out``, default ``folder/report``), created."""
    path = Path(out) if out else folder / "report"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_report(blocks: list[Block], folder: Path, plots: list[Path],
                 notice: str = "") -> ReportPaths:
    """``folder/report.md`` and ``folder/report.html`` from the blocks."""
    md_path = folder / "report.md"
    md_path.write_text(markdown(blocks))
    html_path = folder / "report.html"
    html_path.write_text(html_page(blocks))
    return ReportPaths(folder, html_path, md_path, plots, notice)


def duration(seconds: float) -> str:
    """'1 h 05 min', or '3 min 07 s' under an hour."""
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def md_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def markdown(blocks: list[Block]) -> str:
    parts = []
    for kind, *body in blocks:
        if kind in ("h1", "h2"):
            parts.append(f"{'#' * int(kind[1])} {body[0]}\n")
        elif kind == "note":
            parts.append(f"**{body[0]}**\n")
        elif kind == "p":
            parts.append(body[0] + "\n")
        elif kind == "ul":
            parts.append("\n".join(f"- {x}" for x in body[0]) + "\n")
        elif kind == "table":
            parts.append(md_table(body[0]) + "\n")
        elif kind == "figure":
            parts += [f"![{body[0].stem}]({body[0].name})\n", body[1] + "\n"]
    return "\n".join(parts)


CSS = """body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222;
background:#fff}table{border-collapse:collapse;margin:.5em 0 1.5em;display:block;overflow-x:auto}
th,td{border:1px solid #bbb;padding:.3em .6em;text-align:left}th{background:#eef2f7}
img{max-width:100%;border:1px solid #ddd}.note{background:#fff3cd;padding:.5em 1em;
border:1px solid #e0c97f}figcaption{color:#555;margin-bottom:1.5em}"""


def html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_page(blocks: list[Block]) -> str:
    e = html.escape
    title = next((body[0] for kind, *body in blocks if kind == "h1"), "report")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title>"
             f"<style>{CSS}</style></head><body>"]
    for kind, *body in blocks:
        if kind in ("h1", "h2"):
            parts.append(f"<{kind}>{e(body[0])}</{kind}>")
        elif kind == "note":
            parts.append(f"<p class='note'>{e(body[0])}</p>")
        elif kind == "p":
            parts.append(f"<p>{e(body[0])}</p>")
        elif kind == "ul":
            parts.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in body[0]) + "</ul>")
        elif kind == "table":
            parts.append(html_table(body[0]))
        elif kind == "figure":
            data = base64.b64encode(body[0].read_bytes()).decode("ascii")
            parts.append(f"<figure><img alt='{e(body[0].stem)}' src='data:image/png;base64,"
                         f"{data}'><figcaption>{e(body[1])}</figcaption></figure>")
    parts.append("</body></html>\n")
    return "".join(parts)

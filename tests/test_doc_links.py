"""Every relative link in README.md and docs/ points at a file, and at a heading of it when the
link names one (GitHub's anchor rules), so a reader never lands on nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        a = anchor(line.lstrip("#"))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks are not links
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in LINK.findall(text)]


def test_the_anchor_rule():
    assert anchor(" The fifth round (`hacking_cpu`)") == "the-fifth-round-hacking_cpu"
    assert anchor(" The paper's numbers") == "the-papers-numbers"


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            broken.append(f"{target}: no heading '#{frag}' in {dest.name}")
    return broken


def test_a_planted_broken_link_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md) [ok](other.md#a-section) [ok](#here) [web](https://x.org)\n"
                    "# Here\n[gone](missing.md) [no heading](other.md#nowhere)\n"
                    "`[in code](missing2.md)`\n")
    assert broken_links(page) == ["missing.md: no such file",
                                  "other.md#nowhere: no heading '#nowhere' in other.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = broken_links(page)
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_readme_stays_a_first_read():
    """Results, rounds and reference material live in docs/; the README stays short."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 230, f"README.md has {len(lines)} lines; move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_heading_is_a_paragraph(page):
    """A heading names its section (at most 100 characters); the finding goes under it."""
    fenced, long = False, []
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#") and len(line.lstrip("#").strip()) > 100:
            long.append(line[:60])
    assert not long, f"{page.name}: headings over 100 characters: {long}"

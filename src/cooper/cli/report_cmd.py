"""``cooper report``: plots and an HTML + markdown report of an experiment folder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="plots and a report (HTML + markdown) of an experiment folder",
        description="Read an experiment folder written by `cooper experiment hacking` (complete "
                    "or not) and write PNG plots, report.md and a self-contained report.html "
                    "(images embedded, works offline) into DIR/report.")
    p.add_argument("dir", help="experiment folder")
    p.add_argument("--out", default=None, help="report folder (default: DIR/report)")
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from cooper.experiment.report import build_report

    paths = build_report(args.dir, args.out)
    print(f"report: {paths.html}\nmarkdown: {paths.markdown}\nplots: "
          f"{', '.join(p.name for p in paths.plots)}")
    return 0

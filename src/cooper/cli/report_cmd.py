"""``cooper report``: plots and an HTML + markdown report of an experiment or a training run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="plots and a report (HTML + markdown) of an experiment or a training run",
        description="Read DIR and write PNG plots, report.md and a self-contained report.html "
                    "(images embedded, works offline) into DIR/report. DIR is either an "
                    "experiment folder written by `cooper experiment hacking` (it holds "
                    "experiment.yaml; complete or not): the report opens with one table (per "
                    "arm: its verdict, final accuracy and difference from the rule arm) and a "
                    "sentence per finding, then the definitions and every figure behind them; "
                    "or a training run folder, the output_dir of `cooper train` (it holds "
                    "metrics.jsonl; the run may still be going): the report opens with a short "
                    "table of the run's answer (the reward paid against verified accuracy early "
                    "and late, held-out accuracy, hacking signals, pairs and reward-model "
                    "updates) and a sentence per finding, then the definitions, every total, and "
                    "plots of the reward paid against verified accuracy, the hacking signals, "
                    "the reward-model update and the time per stage. Metrics a run did not log "
                    "are left out.")
    p.add_argument("dir", help="experiment folder or training run folder")
    p.add_argument("--out", default=None, help="report folder (default: DIR/report)")
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from cooper.infra.files import check_out_dir
    from cooper.report.run_report import report_folder

    if args.out:  # before any figure is computed, not when the report is written
        check_out_dir("--out", args.out)
    paths = report_folder(args.dir, args.out)
    print(f"report: {paths.html}\nmarkdown: {paths.markdown}\nplots: "
          f"{', '.join(p.name for p in paths.plots) or 'none'}")
    if paths.notice:  # said here too: whoever only reads the terminal must not miss it
        print(f"note: {paths.notice}")
    return 0

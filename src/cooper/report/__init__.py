"""Reports: what a finished (or running) training run or experiment found, for a reader.

Takes the folders the later stages write: a ``cooper train`` run folder (its ``metrics.jsonl``
and settings) or an experiment folder (one folder per seed, each with its setup and one run per
arm; where every file is: :mod:`.experiment_layout`, which the experiment writes by too).
Computes every figure from the raw records with its definition next to it (:mod:`.figures`;
a run's totals: :mod:`.run_totals`), judges each arm hacked or not (:mod:`.verdict`) on the
seeds where that means something (:mod:`.validity`), draws the plots (:mod:`.plots`,
:mod:`.run_plots`) and hands on ``report.md`` and a self-contained ``report.html``
(:mod:`.document`): an experiment's over seeds (:mod:`.experiment_report`; the tables after
its verdict: :mod:`.experiment_tables`), a run's in plain language (:mod:`.run_report`, whose
:func:`report_folder` picks the report a folder gets).
"""

from cooper.report.document import ReportPaths
from cooper.report.experiment_report import build_report
from cooper.report.run_report import build_run_report, report_folder
from cooper.report.run_totals import RunTotals, run_totals

__all__ = ["ReportPaths", "RunTotals", "build_report", "build_run_report", "report_folder",
           "run_totals"]

"""Experiments: several ``cooper train`` runs compared side by side, and the laptop demo.

Takes an experiment preset (:class:`cooper.config.experiment.ExperimentConfig`); builds what
every arm starts from (:mod:`.setup`: initial policy and reward model, probe set, the initial
scores), trains the same policy once per arm, paid by the verifier, a frozen reward model or
Cooper's online-updated one (:mod:`.hacking`), scores every policy on the benchmarks
(:mod:`.final_eval`), each stage resumable; hands on an experiment folder that
:func:`build_report` turns into tables and plots (:mod:`.report`, :mod:`.plots`). The CPU
testbed's tiny models are built by :mod:`.testbed`; ``cooper demo`` runs the whole pipeline on
the embedded model (:mod:`.demo`).
"""

from cooper.experiment.demo import DemoSettings, run_demo
from cooper.experiment.final_eval import evaluate_policy
from cooper.experiment.hacking import run_experiment
from cooper.experiment.report import ReportPaths, build_report
from cooper.experiment.setup import Setup, run_setup
from cooper.experiment.testbed import tiny_arith_models

__all__ = ["DemoSettings", "ReportPaths", "Setup", "build_report", "evaluate_policy",
           "run_demo", "run_experiment", "run_setup", "tiny_arith_models"]

"""Experiments: several ``cooper train`` runs compared side by side, and the laptop demo.

Takes an experiment preset (:class:`cooper.config.experiment.ExperimentConfig`); per seed,
builds what every arm starts from (:mod:`.setup`: initial policy and reward model, probe set, the
initial scores), trains the same policy once per arm, paid by the verifier, a frozen reward model
or Cooper's online-updated one (:mod:`.hacking`), scores every policy on the benchmarks
(:mod:`.final_eval`), each stage resumable and run here or in up to N worker processes
(:mod:`.jobs`); hands on an experiment folder (laid out as
:mod:`cooper.report.experiment_layout` says) that :func:`cooper.report.build_report` turns into
a verdict, tables and plots over seeds. The CPU testbed's tiny models are built by
:mod:`.testbed`; ``cooper demo`` runs the whole pipeline on the embedded model and writes its
run's report with :func:`cooper.report.build_run_report` (:mod:`.demo`).
"""

import importlib

# Exported lazily (PEP 562): the demo and the arms import the training stack (TRL, seconds to
# load), and cooper.experiment.testbed must be importable without it.
_EXPORTS = {"run_demo": "cooper.experiment.demo", "evaluate_policy": "cooper.experiment.final_eval",
            "run_experiment": "cooper.experiment.hacking",
            "Setup": "cooper.experiment.setup", "run_setup": "cooper.experiment.setup",
            "tiny_arith_models": "cooper.experiment.testbed"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'cooper.experiment' has no attribute {name!r}")

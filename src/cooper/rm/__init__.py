"""The reward-model stage: VerifyRM, trained offline on labelled triples and online by Cooper.

Takes labelled (question, reference answer, completion) triples from the data stage, and, during
RL, (positive, negative) pairs of completions from :mod:`cooper.rl`. :mod:`.template` renders a
triple into VerifyRM's escaped, truncated input and fits it to a token budget;
:mod:`.model` is the one-logit classifier over it (:class:`RewardModel`, reward
``sigmoid(logit)``) and :mod:`.spec` what a saved folder says about how to read it; :mod:`.losses` holds the two objectives as pure tensor functions (BCE and
the pairwise losses: Bradley-Terry, margin, anchor); :mod:`.training` trains offline with BCE
(``cooper rm train``, settings in :class:`cooper.config.rm.RMTrainConfig`); :mod:`.update` is
Cooper's online pairwise update, one step per RL step (:class:`PairwiseUpdater`); :mod:`.layers`
leaves only a model's top layers trainable, and :mod:`.trunk` caches the frozen lower layers so
training only the top ones is fast; :mod:`.metrics` judges the
model as a binary classifier (accuracy, F1, AUROC, ECE); :mod:`.report` gives those figures per
source and per kind (``cooper rm eval``'s tables) and :mod:`.plot` the reliability diagram;
:mod:`.calibration` fits the temperature that ``score`` divides logits by; :mod:`.robustness` is
the shipped, versioned suite of adversarial completions (``cooper rm eval --suite
robustness``). Hands on a :class:`RewardModel` that scores triples, saved with its input spec
and temperature so scoring reproduces training. Every module imports
torch only inside its functions, so importing this package stays cheap.
"""

from cooper.rm.calibration import fit_temperature, reliability_bins
from cooper.rm.losses import (
    anchor_loss,
    bce_loss,
    bradley_terry_loss,
    margin_loss,
    pair_objective,
)
from cooper.rm.metrics import BinaryMetrics, Confusion, binary_metrics, metrics_by_group
from cooper.rm.model import RewardModel
from cooper.rm.report import EvalReport, eval_report, format_report
from cooper.rm.robustness import SUITE_VERSION, build_suite, suite_report
from cooper.rm.template import (
    SPEC_FILE,
    TEMPLATE_VERSION,
    InputSpec,
    escape_field,
    parse_rendered,
    render,
    unescape_field,
)
from cooper.rm.training import EpochReport, TrainReport, evaluate, train_bce
from cooper.rm.trunk import FrozenTrunk
from cooper.rm.update import PairwiseStats, PairwiseUpdater

__all__ = ["SPEC_FILE", "SUITE_VERSION", "TEMPLATE_VERSION", "BinaryMetrics", "Confusion",
           "EpochReport", "EvalReport", "FrozenTrunk", "InputSpec", "PairwiseStats",
           "PairwiseUpdater", "RewardModel", "TrainReport", "bce_loss", "binary_metrics",
           "build_suite", "escape_field", "eval_report", "evaluate", "fit_temperature",
           "format_report", "reliability_bins", "suite_report",
           "metrics_by_group", "anchor_loss", "bradley_terry_loss", "margin_loss", "pair_objective",
           "parse_rendered", "render", "train_bce",
           "unescape_field"]

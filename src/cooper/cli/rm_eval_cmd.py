"""``cooper rm eval`` (labelled files, the robustness suite, tables, reliability diagram) and
``cooper rm calibrate`` (a fitted temperature saved with the model)."""

from __future__ import annotations

import argparse
import json
import time

from cooper.cli.rm_common import (
    add_input_args,
    add_model_args,
    check_positive,
    load_rm,
    load_rows,
)
from cooper.infra.files import check_out_file


def register(rsub: argparse._SubParsersAction) -> None:
    ev = rsub.add_parser(
        "eval", help="accuracy, F1, AUROC, ECE per source and kind; the robustness suite",
        description="Score labelled triples (ours, or VerifyBench's question/answer/completion/"
                    "gold_correct) and print the metrics overall, per source and per kind "
                    "(tables), and/or run the shipped robustness suite (--suite robustness): "
                    "adversarial wrong completions over a dataset's test problems, reported as "
                    "the false-positive rate per kind. A verdict is 'correct' when the score is "
                    "at least --threshold.")
    add_model_args(ev, required=True)
    ev.add_argument("--data", default=None, help="labelled triples (.jsonl/.json/.parquet)")
    ev.add_argument("--suite", choices=("robustness",), default=None,
                    help="also (or only) score the shipped adversarial suite")
    ev.add_argument("--dataset", default=None,
                    help="problems of the suite (default: gsm8k)")
    ev.add_argument("--split", default=None, help="split of the suite's problems (default: test)")
    ev.add_argument("--n", type=int, default=None,
                    help="the suite's problems: the first N of the split (default: 40)")
    ev.add_argument("--threshold", type=float, default=0.5, help="(default: %(default)s)")
    ev.add_argument("--balance", type=int, default=None, metavar="SEED",
                    help="score a label-balanced subset of --data: every row of the rarer label "
                         "and as many of the other, drawn with SEED (real completions are "
                         "mostly wrong; accuracy on them alone rewards saying 'wrong')")
    ev.add_argument("--json", action="store_true",
                    help="end with one JSON object holding every figure")
    ev.add_argument("--plot", default=None, metavar="FILE.png",
                    help="write the reliability diagram of --data (else of the suite) here")
    add_input_args(ev)
    ev.set_defaults(func=_eval)

    cal = rsub.add_parser(
        "calibrate", help="fit a temperature on held-out labelled triples; save it with the model",
        description="Score held-out labelled triples, fit the temperature T that minimises the "
                    "log-loss of sigmoid(logit / T), and write it into the model folder's "
                    "cooper_rm.json; scoring then divides every logit by T (rankings do not "
                    "change). Use triples the model was not trained on. Prints ECE and log-loss "
                    "before and after.")
    cal.add_argument("--model", required=True, help="a reward-model folder")
    cal.add_argument("--data", required=True, help="held-out labelled triples")
    cal.add_argument("--batch-size", type=int, default=16,
                     help="sequences per forward pass (default: %(default)s)")
    cal.add_argument("--max-length", type=int, default=None,
                     help="token budget per triple (default: the one the model was trained with)")
    cal.add_argument("--trust-remote-code", action="store_true",
                     help="allow a checkpoint to run its own Python code (off by default)")
    cal.add_argument("--balance", type=int, default=None, metavar="SEED",
                     help="fit on a label-balanced subset of --data, drawn with SEED (as `eval "
                          "--balance`): a temperature fitted where 85%% are wrong flattens scores "
                          "towards that prior")
    cal.add_argument("--dry-run", action="store_true", help="fit and report; write nothing")
    cal.add_argument("--json", action="store_true", help="end with one JSON object")
    add_input_args(cal)
    cal.set_defaults(func=_calibrate)


def _eval(args: argparse.Namespace) -> int:
    from cooper.errors import UserError

    if args.data is None and args.suite is None:
        raise UserError("give --data FILE (labelled triples) and/or --suite robustness")
    if args.suite is None and (args.dataset or args.split or args.n is not None):
        raise UserError("--dataset, --split and --n choose the suite's problems; add "
                        "--suite robustness")
    check_positive("--n", args.n)
    if not 0 <= args.threshold <= 1:  # scores are probabilities; nan fails this too
        raise UserError(f"--threshold must be in [0, 1] (a verdict is 'correct' when the score "
                        f"is at least it), got {args.threshold}")
    if args.plot and not args.plot.lower().endswith(".png"):
        raise UserError(f"--plot writes a PNG; give a file ending in .png, got {args.plot}")
    if args.plot:
        check_out_file("--plot", args.plot)
    rows = None
    if args.data is not None:  # a bad file is said before the model loads
        rows = load_rows(args, args.data, require_label=True)
        _balance(args, rows)
    rm = load_rm(args)
    result: dict = {}
    plotted = None
    if rows is not None:
        result, plotted = _eval_file(args, rm, rows)
    if args.suite is not None:
        suite, suite_plot = _eval_suite(args, rm)
        if args.data is None:
            result, plotted = suite, suite_plot
        else:
            result["suite"] = suite
    if args.plot:
        from cooper.rm.plot import plot_reliability

        scores, labels, title = plotted
        path = plot_reliability(scores, labels, args.plot, title=title)
        print(f"reliability diagram: {path}")
    if args.json:
        print(json.dumps(result))
    return 0


def balanced(rows: list, seed: int) -> list:
    """Every row of the rarer label and as many rows of the other, drawn with ``seed``, in
    their file order (:func:`cooper.rm.metrics.balanced_indices`); a clear error when one label
    is missing."""
    from cooper.errors import UserError
    from cooper.rm.metrics import balanced_indices

    try:
        return [rows[i] for i in balanced_indices([r.label for r in rows], seed)]
    except ValueError as e:
        raise UserError(f"--balance: {e}") from None


def _balance(args: argparse.Namespace, rows) -> None:
    """With ``--balance SEED``, keep a label-balanced subset of ``rows`` (in place) and say so."""
    if args.balance is not None:
        rows.rows = balanced(rows.rows, args.balance)
        print(f"balanced: {len(rows.rows)} rows, half of each label (seed {args.balance})")


def _blank(rows):
    from dataclasses import replace

    from cooper.types import Triple

    return [replace(r, triple=Triple(r.triple.question, "", r.triple.completion)) for r in rows]


def _eval_file(args: argparse.Namespace, rm, rows):
    from cooper.rm.report import eval_report, format_report

    t0 = time.perf_counter()
    scores = rm.score(rows.triples, batch_size=args.batch_size, progress=not args.json)
    seconds = time.perf_counter() - t0
    labels = rows.labels
    report = eval_report(scores, labels, [r.source for r in rows], [r.kind for r in rows],
                         threshold=args.threshold)
    overall = report.overall.metrics
    c = overall.confusion
    print(f"{rows.name}: n={overall.n} ({overall.positives} correct), model {args.model}"
          f"{', reference blanked' if args.no_reference else ''}"
          f"{f', temperature {rm.temperature:.4g}' if rm.temperature != 1 else ''}")
    for name in ("accuracy", "precision", "recall", "f1", "auroc", "ece"):
        print(f"  {name:9s} {getattr(overall, name):.4f}")
    print(f"  confusion (rows: label correct/wrong, cols: verdict correct/wrong): "
          f"[[{c.tp}, {c.fn}], [{c.fp}, {c.tn}]]")
    print()
    print(format_report(report))
    print(f"scored in {seconds:.1f} s ({overall.n / max(seconds, 1e-9):.2f} triples/s)")
    result = {**report.to_dict(), "no_reference": args.no_reference, "model": str(args.model),
              "data": str(args.data), "skipped": len(rows.skipped), "seconds": round(seconds, 2),
              "temperature": rm.temperature}
    return result, (scores, labels, str(args.data))


def _eval_suite(args: argparse.Namespace, rm):
    from cooper.rm.robustness import (
        DEFAULT_DATASET,
        DEFAULT_PROBLEMS,
        DEFAULT_SPLIT,
        build_suite,
        format_suite,
        suite_problems,
        suite_report,
    )

    dataset, split = args.dataset or DEFAULT_DATASET, args.split or DEFAULT_SPLIT
    problems = suite_problems(dataset, split, args.n or DEFAULT_PROBLEMS)
    suite = build_suite(problems)
    items = _blank(suite.items) if args.no_reference else suite.items
    t0 = time.perf_counter()
    scores = rm.score([r.triple for r in items], batch_size=args.batch_size,
                      progress=not args.json)
    seconds = time.perf_counter() - t0
    name = f"{dataset}/{split}"
    report = suite_report(suite, scores, dataset=name, threshold=args.threshold)
    print(format_suite(report))
    print(f"suite scored in {seconds:.1f} s")
    result = {**report.to_dict(), "model": str(args.model), "no_reference": args.no_reference,
              "seconds": round(seconds, 2), "temperature": rm.temperature}
    return result, (scores, [False] * len(scores), f"robustness suite, {name}")


def _calibrate(args: argparse.Namespace) -> int:
    from cooper.errors import UserError
    from cooper.rm.calibration import apply_temperature, fit_temperature, nll
    from cooper.rm.metrics import expected_calibration_error
    from cooper.rm.template import SPEC_FILE

    args.no_reference = False
    rows = load_rows(args, args.data, require_label=True)
    _balance(args, rows)
    labels = rows.labels
    if len(set(labels)) < 2:
        raise UserError(f"{args.data} holds only {'correct' if labels[0] else 'wrong'} rows; "
                        "calibration needs both")
    rm = load_rm(args)
    logits = rm.raw_logits(rows.triples, batch_size=args.batch_size, progress=not args.json)
    before_t = rm.temperature
    fitted = fit_temperature(logits, labels)
    before = {"temperature": before_t, "nll": nll(logits, labels, before_t),
              "ece": expected_calibration_error(apply_temperature(logits, before_t), labels)}
    after = {"temperature": fitted, "nll": nll(logits, labels, fitted),
             "ece": expected_calibration_error(apply_temperature(logits, fitted), labels)}
    print(f"{rows.name}: n={len(labels)} ({sum(labels)} correct), model {args.model}")
    for name, d in (("before", before), ("after", after)):
        print(f"  {name:6s} temperature {d['temperature']:.4g}  ECE {d['ece']:.4f}  "
              f"log-loss {d['nll']:.4f}")
    if args.dry_run:
        print("dry run: nothing written")
    else:
        rm.temperature = fitted
        path = rm.save_spec(args.model)
        print(f"wrote temperature {fitted:.4g} to {path} (scores are now sigmoid(logit / "
              f"{fitted:.4g}); `cooper rm train` on this model resets it to 1)")
    if args.json:
        print(json.dumps({"model": str(args.model), "data": str(args.data), "n": len(labels),
                          "before": before, "after": after, "written": not args.dry_run,
                          "spec_file": str(SPEC_FILE)}))
    return 0

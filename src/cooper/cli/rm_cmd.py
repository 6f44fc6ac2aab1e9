"""``cooper rm``: train, evaluate and score with the reference-based reward model (VerifyRM)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cooper.config.rm import RMTrainConfig
from cooper.data.problems import DEFAULT_MAX_ROW_BYTES
from cooper.infra.models import DEFAULT_MODEL
from cooper.rm.template import InputSpec


def _add_input_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input rows (.jsonl/.json/.parquet)")
    g.add_argument("--skip-bad", action="store_true",
                   help="skip malformed rows, counting and logging them, instead of stopping")
    g.add_argument("--max-row-bytes", type=int, default=DEFAULT_MAX_ROW_BYTES,
                   help="largest accepted row (default: %(default)s)")
    g.add_argument("--source-field", default="source",
                   help="column naming each row's source, for per-source figures "
                        "(default: %(default)s; missing: the file name)")
    g.add_argument("--limit", type=int, default=None, help="use only the first N rows")


def _add_model_args(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument("--model", required=required,
                   help="a reward-model folder written by `cooper rm train`")
    p.add_argument("--batch-size", type=int, default=16,
                   help="sequences per forward pass (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=None,
                   help="token budget per triple (default: the one the model was trained with)")
    p.add_argument("--no-reference", action="store_true",
                   help="blank the reference answer, to measure what it adds")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="allow a checkpoint to run its own Python code (off by default)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm", help="train, evaluate and score with the reward model (VerifyRM)")
    rsub = p.add_subparsers(dest="rm_command", metavar="ACTION", required=True)

    tr = rsub.add_parser(
        "train", help="train a reward model with binary cross-entropy on labelled triples",
        description="Fine-tune a one-logit classifier, built from a causal LM checkpoint, on "
                    "rows with question, reference, completion and label (what `cooper data "
                    "perturbed` writes). Saves safetensors weights, the tokenizer and "
                    "cooper_rm.json (template version and lengths) to --out.")
    tr.add_argument("--data", required=True, help="labelled triples (.jsonl/.json/.parquet)")
    tr.add_argument("--base", default=DEFAULT_MODEL,
                    help=f"causal LM (or reward model) to start from: '{DEFAULT_MODEL}' "
                         "(embedded default), a local folder or a Hub id (default: %(default)s)")
    tr.add_argument("--out", required=True, help="folder to write the trained reward model to")
    tr.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")
    # defaults come from the settings dataclasses, so they are defined once
    defaults, spec = RMTrainConfig(), InputSpec()
    tr.add_argument("--lr", type=float, default=defaults.lr,
                    help="learning rate (default: %(default)s)")
    tr.add_argument("--weight-decay", type=float, default=defaults.weight_decay,
                    help="(default: %(default)s)")
    tr.add_argument("--epochs", type=int, default=defaults.epochs, help="(default: %(default)s)")
    tr.add_argument("--batch-size", type=int, default=defaults.batch_size,
                    help="sequences per forward pass (default: %(default)s)")
    tr.add_argument("--grad-accum", type=int, default=defaults.grad_accum,
                    help="forward passes per optimizer step (default: %(default)s)")
    tr.add_argument("--warmup-ratio", type=float, default=defaults.warmup_ratio,
                    help="fraction of steps with linear warm-up, then cosine decay "
                         "(default: %(default)s)")
    tr.add_argument("--max-length", type=int, default=spec.max_length,
                    help="token budget per triple; longer ones are cut in field middles, the "
                         "completion's end is kept (default: %(default)s)")
    tr.add_argument("--holdout", type=float, default=defaults.holdout,
                    help="fraction of questions held out for metrics after each epoch; 0 to "
                         "train on everything (default: %(default)s)")
    tr.add_argument("--train-layers", type=int, default=defaults.train_layers,
                    help="train only the top N decoder layers plus the score head (much faster "
                         "on a CPU; default: all layers)")
    tr.add_argument("--seed", type=int, default=defaults.seed, help="(default: %(default)s)")
    tr.add_argument("--dtype", default=None,
                    help="weights dtype, e.g. float32 or bfloat16 (default: the checkpoint's)")
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    tr.add_argument("--trust-remote-code", action="store_true",
                    help="allow a checkpoint to run its own Python code (off by default)")
    _add_input_args(tr)
    tr.set_defaults(func=_train)

    ev = rsub.add_parser(
        "eval", help="accuracy, precision, recall, F1, AUROC, ECE of a reward model",
        description="Score labelled triples (ours, or VerifyBench's question/answer/completion/"
                    "gold_correct) and report the metrics overall and per source. A verdict "
                    "is 'correct' when the score is at least --threshold.")
    _add_model_args(ev, required=True)
    ev.add_argument("--data", required=True, help="labelled triples (.jsonl/.json/.parquet)")
    ev.add_argument("--threshold", type=float, default=0.5, help="(default: %(default)s)")
    ev.add_argument("--json", action="store_true",
                    help="end with one JSON object holding every figure")
    _add_input_args(ev)
    ev.set_defaults(func=_eval)

    sc = rsub.add_parser("score", help="write one JSON line per triple with its reward",
                         description="Score triples (labels optional) and print one JSON "
                                     "object per row: id, source, score (and label if given).")
    _add_model_args(sc, required=True)
    sc.add_argument("--file", required=True, help="triples (.jsonl/.json/.parquet)")
    sc.add_argument("--out", default=None, help="write the lines to this file instead of stdout")
    _add_input_args(sc)
    sc.set_defaults(func=_score)


def _check_positive(name: str, value: int | None) -> None:
    from cooper.errors import UserError

    if value is not None and value < 1:
        raise UserError(f"{name} must be at least 1, got {value}")


def _load_rows(args: argparse.Namespace, file: str, require_label: bool):
    from cooper.data.triples import load_triples
    from cooper.types import Triple

    rows = load_triples(file, require_label=require_label, skip_bad=args.skip_bad,
                        max_row_bytes=args.max_row_bytes, limit=args.limit,
                        source_field=args.source_field)
    if getattr(args, "no_reference", False):
        from dataclasses import replace

        rows.rows = [replace(r, triple=Triple(r.triple.question, "", r.triple.completion))
                     for r in rows.rows]
    if rows.skipped:
        print(f"skipped {len(rows.skipped)} bad row(s); first: {rows.skipped[0].where}: "
              f"{rows.skipped[0].reason}", file=sys.stderr)
    return rows


def _load_rm(args: argparse.Namespace):
    from cooper.rm.model import RewardModel
    from cooper.rm.template import SPEC_FILE

    _check_positive("--batch-size", args.batch_size)
    if not (Path(args.model) / SPEC_FILE).is_file():
        print(f"warning: {args.model} has no {SPEC_FILE}: not a trained reward model, its "
              "score head may be untrained", file=sys.stderr)
    return RewardModel.load(args.model, trust_remote_code=args.trust_remote_code,
                            max_length=args.max_length)


def _train(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from cooper.errors import UserError
    from cooper.rm.model import RewardModel
    from cooper.rm.training import train_bce

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise UserError(f"{out} exists and is not empty; pick another --out or pass --overwrite")
    config = RMTrainConfig(lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
                           batch_size=args.batch_size, grad_accum=args.grad_accum,
                           warmup_ratio=args.warmup_ratio, holdout=args.holdout,
                           seed=args.seed, train_layers=args.train_layers)
    rows = _load_rows(args, args.data, require_label=True)
    rm = RewardModel.load(args.base, trust_remote_code=args.trust_remote_code,
                          max_length=args.max_length, dtype=args.dtype)
    t0 = time.perf_counter()

    def on_epoch(ep) -> None:
        line = f"epoch {ep.epoch}: train loss {ep.train_loss:.4f} ({ep.seconds:.0f} s)"
        if ep.heldout:
            h = ep.heldout
            line += (f"; held-out n={h.n} accuracy {h.accuracy:.4f} f1 {h.f1:.4f} "
                     f"auroc {h.auroc:.4f} ece {h.ece:.4f}")
        print(line, flush=True)

    report = train_bce(rm, rows.rows, config, progress=not args.no_progress, on_epoch=on_epoch)
    seconds = time.perf_counter() - t0
    summary = {
        "base": str(args.base), "data": str(args.data), "train_size": report.train_size,
        "heldout_size": report.heldout_size, "trainable_params": report.trainable_params,
        "cached_trunk": report.cached_trunk,
        "optimizer_steps": report.optimizer_steps, "train_seconds": round(seconds, 1),
        "config": asdict(config),
        "epochs": [{"epoch": e.epoch, "train_loss": e.train_loss, "seconds": round(e.seconds, 1),
                    "heldout": e.heldout.to_dict() if e.heldout else None}
                   for e in report.epochs],
    }
    rm.save(out, extra={"base": str(args.base)})
    (out / "train_report.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"saved reward model to {out} ({report.train_size} training triples, "
          f"{report.optimizer_steps} steps, {seconds:.0f} s"
          f"{', frozen layers run once' if report.cached_trunk else ''})")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from cooper.rm.metrics import binary_metrics, metrics_by_group

    rows = _load_rows(args, args.data, require_label=True)
    rm = _load_rm(args)
    t0 = time.perf_counter()
    scores = rm.score(rows.triples, batch_size=args.batch_size, progress=not args.json)
    seconds = time.perf_counter() - t0
    labels = rows.labels
    overall = binary_metrics(scores, labels, threshold=args.threshold)
    by_source = metrics_by_group(scores, labels, [r.source for r in rows],
                                 threshold=args.threshold)
    c = overall.confusion
    print(f"{rows.name}: n={overall.n} ({overall.positives} correct), model {args.model}"
          f"{', reference blanked' if args.no_reference else ''}")
    for name in ("accuracy", "precision", "recall", "f1", "auroc", "ece"):
        print(f"  {name:9s} {getattr(overall, name):.4f}")
    print(f"  confusion (rows: label correct/wrong, cols: verdict correct/wrong): "
          f"[[{c.tp}, {c.fn}], [{c.fp}, {c.tn}]]")
    if len(by_source) > 1:
        for name, m in by_source.items():
            print(f"  source {name}: n={m.n} accuracy {m.accuracy:.4f} f1 {m.f1:.4f}")
    print(f"  scored in {seconds:.1f} s ({overall.n / max(seconds, 1e-9):.2f} triples/s)")
    if args.json:
        result = {**overall.to_dict(), "by_source": {k: v.to_dict() for k, v in by_source.items()},
                  "no_reference": args.no_reference, "model": str(args.model),
                  "data": str(args.data), "skipped": len(rows.skipped),
                  "seconds": round(seconds, 2)}
        print(json.dumps(result))
    return 0


def _score(args: argparse.Namespace) -> int:
    rows = _load_rows(args, args.file, require_label=False)
    rm = _load_rm(args)
    scores = rm.score(rows.triples, batch_size=args.batch_size)
    lines = []
    for r, s in zip(rows, scores, strict=True):
        item = {"id": r.id, "source": r.source, "score": s}
        if r.label is not None:
            item["label"] = r.label
        lines.append(json.dumps(item))
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {len(lines)} scores to {args.out}")
    else:
        sys.stdout.write(text)
    return 0

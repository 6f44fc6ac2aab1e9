"""``cooper rm``: train, evaluate and score with the reference-based reward model (VerifyRM).

``eval`` (with the robustness suite, tables and the reliability diagram) and ``calibrate`` are
in :mod:`.rm_eval_cmd`; the argument groups and loaders they share are in :mod:`.rm_common`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cooper.cli.common import check_not_input
from cooper.cli.rm_common import (
    add_input_args,
    add_model_args,
    file_sha256,
    load_rm,
    load_rows,
)
from cooper.config.rm import RMTrainConfig
from cooper.infra.files import check_out_dir, check_out_file
from cooper.infra.models import DEFAULT_MODEL
from cooper.rm.template import InputSpec


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
                         "(embedded default), 'embedded-trunk-K' (its first K layers, as "
                         "`cooper demo`'s reward model), a local folder or a Hub id (default: "
                         "%(default)s)")
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
    add_input_args(tr)
    tr.set_defaults(func=_train)

    from cooper.cli import rm_eval_cmd

    rm_eval_cmd.register(rsub)  # eval and calibrate

    sc = rsub.add_parser("score", help="write one JSON line per triple with its reward",
                         description="Score triples (labels optional) and print one JSON "
                                     "object per row: id, source, score (and label if given).")
    add_model_args(sc, required=True)
    sc.add_argument("--file", required=True, help="triples (.jsonl/.json/.parquet)")
    sc.add_argument("--out", default=None, help="write the lines to this file instead of stdout")
    add_input_args(sc)
    sc.set_defaults(func=_score)


def _train(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from cooper.errors import UserError
    from cooper.infra.environment import environment
    from cooper.infra.models import check_dtype
    from cooper.rm.model import RewardModel
    from cooper.rm.training import train_bce

    out = Path(args.out)
    check_out_dir("--out", out)
    check_dtype(args.dtype)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        raise UserError(f"{out} exists and is not empty; pick another --out or pass --overwrite")
    config = RMTrainConfig(lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs,
                           batch_size=args.batch_size, grad_accum=args.grad_accum,
                           warmup_ratio=args.warmup_ratio, holdout=args.holdout,
                           seed=args.seed, train_layers=args.train_layers)
    rows = load_rows(args, args.data, require_label=True)
    from transformers import set_seed

    # a new score head is drawn at load: --seed fixes it too, and every generator a library
    # may draw from (Python's, NumPy's, torch's), not torch's alone
    set_seed(args.seed)
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
        # what decides the weights besides the settings: the rows' bytes (one --seed draws
        # other rows from `cooper data equivalence` of another version), the packages, and
        # the threads and matmul library that fix the rounding (cooper.infra.threads)
        "base": str(args.base), "data": str(args.data), "data_sha256": file_sha256(args.data),
        "environment": environment(),
        "train_size": report.train_size,
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


def _score(args: argparse.Namespace) -> int:
    from cooper.infra.files import write_atomic

    if args.out:
        check_out_file("--out", args.out)
        check_not_input({"--out": args.out}, {"--file": args.file})
    rows = load_rows(args, args.file, require_label=False)
    rm = load_rm(args)
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
        write_atomic(args.out, text)  # a crash never leaves half a file of scores
        print(f"wrote {len(lines)} scores to {args.out}")
    else:
        sys.stdout.write(text)
    return 0

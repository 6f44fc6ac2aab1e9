"""``cooper eval``: benchmark a model with the paper's protocol; ``cooper eval compare``: tabulate runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from cooper.cli.common import add_field_args, add_model_args, fields_from_args
from cooper.errors import UserError
from cooper.infra.protocol import PAPER_SAMPLES, PAPER_TEMPERATURE, PAPER_TOP_P

EVAL_DESCRIPTION = f"""\
Sample --n completions per problem, verify each with the rule-based verifier and report, per
benchmark, the mean accuracy over all samples (the paper's number), unbiased pass@k and
majority-vote accuracy, plus the average over benchmarks. Defaults follow the paper's
protocol: temperature {PAPER_TEMPERATURE}, top-p {PAPER_TOP_P}, {PAPER_SAMPLES} samples per problem.

Everything goes to the --out folder: samples/NAME.jsonl (every sample with its prompt,
completion, extracted answer, verdict and token count) and results.json (protocol, versions,
metrics, wall time). The run is resumable: run the same command again after an interruption
and it computes only what is missing, giving the numbers of an uninterrupted run.
"""

EVAL_EPILOG = """\
examples:
  cooper eval --model smollm2-135m-instruct --benchmarks gsm8k,svamp,math500 --out runs/base
  cooper eval --model ckpt/ --benchmarks gsm8k,my.jsonl --question-field problem \\
      --answer-field solution --limit 100 --n 4 --out runs/ckpt
  cooper eval --model ckpt/ --benchmarks arith_2x1:validation,arith_2x1:test --out runs/arith
  cooper eval compare runs/base runs/ckpt --md table.md --csv table.csv
"""


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None


def register(sub: argparse._SubParsersAction) -> None:
    from dataclasses import fields

    from cooper.eval.settings import BACKENDS, EvalSettings

    # the defaults are EvalSettings' (one definition), not repeated here
    d = {f.name: f.default for f in fields(EvalSettings)}
    p = sub.add_parser(
        "eval", help="benchmark accuracy (mean, pass@k, majority vote); 'eval compare' tabulates runs",
        usage="%(prog)s [--model M] [--benchmarks B,B,...] [options] --out DIR\n"
              "       %(prog)s compare DIR [DIR ...] [--metric M] [--md FILE] [--csv FILE]",
        description=EVAL_DESCRIPTION, epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, help_role="model to evaluate")
    p.add_argument("--benchmarks", default="gsm8k,svamp,math500", metavar="NAME[:SPLIT],...",
                   help="comma-separated built-in names, each with an optional split "
                        "(arith_2x1:validation; default: the test split; results name it "
                        "NAME:SPLIT where given), and/or .jsonl/.json/.parquet files "
                        "(default: %(default)s)")
    p.add_argument("--out", metavar="DIR", help="run folder (required); rerun to resume")
    p.add_argument("--limit", type=int, default=None,
                   help="evaluate only the first N problems of each benchmark")
    g = p.add_argument_group("sampling (defaults: the paper's protocol)")
    g.add_argument("--n", type=int, default=d["sampling"].n,
                   help="samples per problem (default: %(default)s)")
    g.add_argument("--temperature", type=float, default=d["sampling"].temperature,
                   help="0 = greedy (default: %(default)s)")
    g.add_argument("--top-p", type=float, default=d["sampling"].top_p,
                   help="(default: %(default)s)")
    g.add_argument("--max-new-tokens", type=int, default=d["sampling"].max_new_tokens,
                   help="completion length limit; a cut completion usually scores wrong "
                        "(default: %(default)s)")
    g.add_argument("--seed", type=int, default=d["sampling"].seed,
                   help="(default: %(default)s)")
    t = g.add_mutually_exclusive_group()
    t.add_argument("--prompt-template", default=None, metavar="TEXT",
                   help="user message with the placeholder {question}, taken literally (use "
                        "$'...\\n...' in bash for newlines); default: the question plus "
                        "'Please reason step by step, and put your final answer within "
                        "\\boxed{}.'")
    t.add_argument("--prompt-template-file", default=None, metavar="FILE",
                   help="read the prompt template from a text file")
    b = p.add_argument_group("backend and scoring")
    b.add_argument("--backend", choices=BACKENDS, default=d["backend"],
                   help="hf: Hugging Face generate, batched and length-sorted (CPU or GPU); "
                        "vllm: vLLM, if installed (GPU) (default: %(default)s)")
    b.add_argument("--batch-size", type=int, default=d["batch_size"],
                   help="sequences per generate call, hf backend (default: %(default)s)")
    b.add_argument("--chunk-size", type=int, default=d["chunk_size"],
                   help="problems per saved chunk, the unit a resumed run skips "
                        "(default: %(default)s)")
    b.add_argument("--dtype", default=None, help="model dtype, e.g. bfloat16 (default: the checkpoint's)")
    b.add_argument("--threads", type=int, default=None,
                   help="CPU threads for torch (default: one per core); on a small or busy "
                        "CPU, --threads 1 can be several times faster")
    b.add_argument("--verify-mode", choices=("strict", "lenient", "gold"),
                   default=d["verify_mode"],
                   help="verifier mode; 'gold' is the testbed's gold judge for integer answers "
                        "in digits, words or Roman numerals, with the strict rule's accuracy "
                        "beside it (default: %(default)s)")
    b.add_argument("--verify-timeout", type=float, default=None, metavar="SECONDS",
                   help="hard time limit per verification (default: the verifier's)")
    b.add_argument("--k", type=_int_list, default=None, metavar="K,K,...",
                   help="pass@k values (default: powers of two up to n, and n)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_field_args(p)
    p.set_defaults(func=_eval)

    # Optional sub-action: without one, `cooper eval` evaluates with the options above.
    actions = p.add_subparsers(dest="eval_action", metavar="ACTION", required=False,
                               help="optional; without it, evaluate")
    # prog by hand: argparse would derive it from the parent's custom usage text
    cmp = actions.add_parser(
        "compare", prog=f"{p.prog} compare",
        help="paper-style table of several runs (markdown and CSV)",
        description="Read the results.json of each run folder and print a runs x benchmarks "
                    "table with an average column, like the paper's main table. Values are "
                    "percent.")
    cmp.add_argument("runs", nargs="+", metavar="DIR", help="run folders written by cooper eval")
    cmp.add_argument("--metric", default="accuracy",
                     help="accuracy (mean over samples), majority, or pass@K, e.g. pass@8 "
                          "(default: %(default)s)")
    cmp.add_argument("--labels", default=None,
                     help="comma-separated row names (default: the folder names)")
    cmp.add_argument("--md", metavar="FILE", default=None, help="also write the markdown table")
    cmp.add_argument("--csv", metavar="FILE", default=None, help="also write the table as CSV")
    cmp.set_defaults(func=_compare)


def _eval(args: argparse.Namespace) -> int:
    from cooper.eval.run import format_summary, run_eval
    from cooper.eval.settings import EvalSettings
    from cooper.infra.generation import SamplingConfig

    if not args.out:
        raise UserError("--out DIR is required: the folder that holds the run (samples, "
                        "results.json); rerun with the same DIR to resume")
    template = args.prompt_template
    if args.prompt_template_file:
        path = Path(args.prompt_template_file)
        if not path.is_file():
            raise UserError(f"prompt template file not found: {path}")
        template = path.read_text(encoding="utf-8")
    settings = EvalSettings(
        model=args.model,
        benchmarks=tuple(b.strip() for b in args.benchmarks.split(",") if b.strip()),
        sampling=SamplingConfig(n=args.n, temperature=args.temperature, top_p=args.top_p,
                                max_new_tokens=args.max_new_tokens, seed=args.seed),
        backend=args.backend, limit=args.limit, prompt_template=template,
        verify_mode=args.verify_mode, verify_timeout_s=args.verify_timeout,
        batch_size=args.batch_size, chunk_size=args.chunk_size, fields=fields_from_args(args),
        skip_bad=args.skip_bad, max_row_bytes=args.max_row_bytes, dtype=args.dtype, ks=args.k,
        trust_remote_code=args.trust_remote_code, threads=args.threads)
    result = run_eval(settings, args.out, progress=not args.no_progress)
    print(format_summary(result))
    print(f"\n{result.samples_computed} samples computed, {result.samples_reused} reused, "
          f"{result.wall_time_s:.1f} s; results: {Path(args.out) / 'results.json'}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from cooper.eval.compare import compare_runs, comparison_csv, comparison_markdown
    from cooper.infra.files import check_out_file

    for flag, path in (("--md", args.md), ("--csv", args.csv)):
        if path:  # before the runs are read: a bad path must not fail after the table prints
            check_out_file(flag, path)
    labels = [x.strip() for x in args.labels.split(",")] if args.labels else None
    table = compare_runs(args.runs, labels=labels, metric=args.metric)
    md = comparison_markdown(table)
    print(md, end="")
    for path, text in ((args.md, md), (args.csv, comparison_csv(table))):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text, encoding="utf-8")
    return 0

"""``cooper data build``: a mixed, honestly labelled reward-model set (:mod:`cooper.data.mix`)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from cooper.cli.common import (
    add_endpoint_args,
    add_field_args,
    add_local_args,
    check_not_input,
    endpoint_base_from_args,
    load_solved_problems,
    local_options_from_args,
)
from cooper.data.problems import DATASET_HELP
from cooper.infra.files import check_out_file


def register(dsub: argparse._SubParsersAction) -> None:
    b = dsub.add_parser(
        "build", help="labelled triples with every kind of wrong: the reward model's training set",
        description="Write a labelled .jsonl of reward-model triples (question, reference, "
                    "completion, label, id, source, kind) from a dataset's gold solutions: "
                    "positives in several surface forms, negatives of many kinds (answer "
                    "changed, cut off, another problem's solution, degenerate text, ...), and "
                    "optionally completions sampled from a local model. The mix is set with "
                    "--mix KIND=WEIGHT (see --show-mix); labels are balanced by default. Every "
                    "row is checked with the verifier; a candidate whose label would be wrong "
                    "is dropped and counted. A summary is printed and saved as OUT.stats.json.")
    b.add_argument("--dataset", help=DATASET_HELP + " with worked solutions")
    b.add_argument("--split", default="train", help="split of a bundled dataset "
                                                    "(default: %(default)s)")
    b.add_argument("--n", type=int, help="number of rows to write")
    b.add_argument("--out", help="output .jsonl file")
    b.add_argument("--seed", type=int, default=None,
                   help="seed of the problem order and every choice (default: the mix's, 0)")
    b.add_argument("--mix", action="append", default=[], metavar="KIND=WEIGHT",
                   help="override a weight (or positive_fraction, seed); repeat or join with "
                        "commas. Weights count within their label and are normalised")
    b.add_argument("--show-mix", action="store_true",
                   help="print every kind with its weight, fraction and meaning, and exit")
    b.add_argument("--solution-field", default=None,
                   help="column of a local file with the worked solution")
    s = b.add_argument_group("sampled completions (optional)")
    s.add_argument("--sample-from", default=None, metavar="SPEC",
                   help="also sample completions from this model (a spec as in `cooper data "
                        "collect`: the embedded default, a folder, api:MODEL@URL); the verifier "
                        "sorts them into sampled_correct and sampled_wrong, and each correct one "
                        "with its answer changed is a sampled_answer_changed")
    s.add_argument("--samples-file", default=None, metavar="FILE",
                   help="completions sampled before: a `cooper data collect` file of one "
                        "generator (such as the OUT.samples.parquet an earlier --sample-from "
                        "build wrote), or 'embedded' for the embedded model's completions that "
                        "ship for --dataset/--split (`cooper data samples` lists them); sorted "
                        "by the verifier exactly as --sample-from's are")
    s.add_argument("--samples", type=int, default=0, metavar="N",
                   help="completions to sample: one each for the first N problems of the build "
                        "order; with --samples-file, the file's completions of those problems "
                        "only (default: %(default)s, all of the file's)")
    s.add_argument("--sample-temperature", type=float, default=0.7, help="(default: %(default)s)")
    s.add_argument("--sample-top-p", type=float, default=0.95, help="(default: %(default)s)")
    s.add_argument("--sample-max-tokens", type=int, default=256,
                   help="most new tokens per completion (default: %(default)s)")
    add_local_args(b)
    add_endpoint_args(b)
    add_field_args(b)
    b.set_defaults(func=_build)


def _mix(args: argparse.Namespace):
    from cooper.config.data_mix import mix_from_overrides
    from cooper.errors import UserError

    mix = mix_from_overrides(args.mix)
    if args.seed is not None:
        if any(part.strip().startswith("seed=") for item in args.mix for part in item.split(",")):
            raise UserError("the seed is given twice (--seed and --mix seed=...); keep one")
        mix = replace(mix, seed=args.seed)
        mix.validate()
    return mix


def _show_mix(mix, sampling: bool) -> None:
    from cooper.config.data_mix import POSITIVE_KINDS, DataMixConfig, kind_names
    from cooper.config.engine import field_docs

    docs = field_docs(DataMixConfig)
    fractions = mix.fractions(sampling=sampling)
    print(f"positive_fraction {mix.positive_fraction}, seed {mix.seed}"
          + ("" if sampling else " (no --sample-from: sampled kinds left out)"))
    print(f"{'kind':24s} {'label':>5s} {'weight':>7s} {'of file':>8s}  meaning")
    for kind in kind_names():
        label = 1 if kind in POSITIVE_KINDS else 0
        share = fractions.get(kind, 0.0)
        doc = " ".join(docs.get(kind, "").split())
        print(f"{kind:24s} {label:5d} {getattr(mix, kind):7.3g} {share:8.1%}  {doc}")


def _samples_path(out: Path) -> Path:
    return out.with_name(out.stem + ".samples.parquet")


def _sample(args: argparse.Namespace, problems, out: Path, seed: int,
            local) -> dict[str, list[str]]:
    """Sample one completion for each of ``problems`` with ``collect`` (resumable, beside OUT)."""
    from cooper.errors import UserError
    from cooper.infra.generation import SamplingConfig
    from cooper.labelling.backends import parse_spec
    from cooper.labelling.collect import collect
    from cooper.labelling.label import sampled_completions

    spec = parse_spec(args.sample_from)
    sampling = SamplingConfig(n=1, temperature=args.sample_temperature, top_p=args.sample_top_p,
                              max_new_tokens=args.sample_max_tokens, seed=seed)
    path = _samples_path(out)
    summary = collect(problems, [spec], sampling, path, local=local,
                      endpoint=endpoint_base_from_args(args), default_key_env=args.api_key_env)
    print(f"sampled {summary.ok} completion(s) from {spec.label} into {path}"
          + (f" ({summary.failed} failed requests, left out)" if summary.failed else ""))
    if summary.failed and not summary.ok:  # a build without the samples asked for: stop
        raise UserError(f"every one of the {summary.failed} sampling request(s) to "
                        f"{spec.label} failed; check that it is reachable and serves its model, "
                        "then rerun the same command (failed requests are retried)")
    return sampled_completions(path, generator=spec.label)


def _build(args: argparse.Namespace) -> int:
    from cooper.data.embedded_samples import EMBEDDED, shipped_samples
    from cooper.data.mix import build_mix, check_size, problem_order, write_build
    from cooper.data.problems import is_local_file
    from cooper.errors import UserError
    from cooper.labelling.label import sampled_completions

    mix = _mix(args)
    if args.show_mix:
        _show_mix(mix, sampling=bool(args.sample_from or args.samples_file))
        return 0
    missing = [f"--{k}" for k in ("dataset", "n", "out") if getattr(args, k) is None]
    if missing:
        raise UserError(f"{', '.join(missing)} required (or --show-mix)")
    if args.n < 2:
        raise UserError(f"--n must be at least 2 (a positive and a negative), got {args.n}")
    if args.sample_from and args.samples_file:
        raise UserError("--sample-from and --samples-file both give sampled completions; keep "
                        "one")
    if args.samples < 0 or (args.samples and not (args.sample_from or args.samples_file)):
        raise UserError("--samples N (N >= 1) goes with --sample-from MODEL or --samples-file "
                        "FILE")
    if args.sample_from and args.samples == 0:
        raise UserError("--sample-from needs --samples N (how many completions to sample)")
    out = Path(args.out)
    if out.suffix != ".jsonl":
        raise UserError(f"--out must be a .jsonl file, got {out}")
    check_out_file("--out", out)
    check_not_input(
        {"--out": out, "--out's statistics": out.with_name(out.stem + ".stats.json"),
         "--out's samples": _samples_path(out) if args.sample_from else None},
        {"--dataset": args.dataset if is_local_file(args.dataset) else None,
         "--samples-file": args.samples_file if args.samples_file != EMBEDDED else None})
    local = local_options_from_args(args)  # checked even when unused: a typo is said
    problems = load_solved_problems(args)
    check_size(args.n, len(problems), mix.positive_fraction, problems.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    sampled = None
    if args.sample_from:
        head = problem_order(problems.problems, mix.seed)[:args.samples]
        sampled = _sample(args, head, out, mix.seed, local)
    elif args.samples_file:
        path = args.samples_file
        if path == EMBEDDED:
            path = shipped_samples(args.dataset, args.split).path
        sampled = sampled_completions(path, skip_bad=args.skip_bad)
        if args.samples:  # as a model would have sampled: the first N of the build order
            head = {p.id for p in problem_order(problems.problems, mix.seed)[:args.samples]}
            sampled = {pid: texts for pid, texts in sampled.items() if pid in head}
        print(f"read {sum(map(len, sampled.values()))} sampled completion(s) of "
              f"{len(sampled)} problem(s) from {path}")
    rows, summary = build_mix(problems.problems, args.n, mix, sampled=sampled,
                              dataset=problems.name)
    stats = write_build(out, rows, summary)
    _print_summary(summary)
    print(f"wrote {summary.rows} rows ({summary.positives} correct, {summary.negatives} wrong) "
          f"from {summary.problems_used} problems of {problems.name} to {out}; "
          f"{summary.dropped} candidate(s) dropped for a label the verifier did not confirm; "
          f"summary in {stats}")
    return 0


def _print_summary(summary) -> None:
    print(f"{'kind':24s} {'label':>5s} {'target':>6s} {'rows':>5s} {'dropped':>8s} {'n/a':>4s}")
    for kind, k in summary.kinds.items():
        dropped = sum(k.dropped.values())
        why = f"  ({', '.join(f'verifier {r}: {c}' for r, c in sorted(k.dropped.items()))})" \
            if dropped else ""
        print(f"{kind:24s} {k.label:5d} {k.target:6d} {k.rows:5d} {dropped:8d} "
              f"{k.not_applicable:4d}{why}")
    if summary.skipped_problems:
        print("skipped problems: " + ", ".join(f"{r}: {c}" for r, c in
                                               sorted(summary.skipped_problems.items())))
    if summary.sampled:
        print("sampled completions by verifier verdict: "
              + ", ".join(f"{r} {c}" for r, c in summary.sampled.items()))
    for note in summary.notes:
        print(f"note: {note}")

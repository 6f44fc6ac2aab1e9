"""The report of a reward-hacking experiment: PNG plots, ``report.md`` and ``report.html``.

Reads an experiment folder written by :mod:`cooper.experiment.hacking` (complete or not: an
arm that has not run yet is listed as such) and writes, into ``DIR/report``:

- ``heldout_accuracy.png``: held-out verified accuracy (``val/accuracy``) against step, per arm;
- ``training_reward.png``: the reward each arm optimises (the verifier in ``rule``, the reward
  model otherwise) against step, with the verified accuracy of the same rollouts dashed;
- ``hacking_gap.png``: ``hacking/gap`` (reward-model mean minus verifier mean) against step;
- ``hacking_top_wrong.png``, ``rm_group_auroc.png``: the calibration-free hacking signals
  (``hacking/top_wrong``, ``rm/group_auroc``) against step;
- ``rm_probe.png``: the reward model's accuracy on the fixed labelled probe against step;
- ``report.md`` (images beside it) and ``report.html`` (images embedded as base64, so the one
  file works offline): the final table (arms x benchmarks + average, the initial policy as the
  "no RL" row), the hacking figures, the settings, software versions and run time.

The plots are drawn by :mod:`cooper.experiment.plots` (raw and thin, with a moving average on
top: per-step curves are noisy); this module reads the folder and renders the tables, markdown
and HTML. Every number in the tables is computed from the raw records, with its definition
written next to it.
"""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cooper.errors import UserError
from cooper.experiment.plots import ARM_LABELS, make_plots, moving_average, window_for
from cooper.infra.files import read_json


@dataclass(frozen=True)
class ReportPaths:
    """Where :func:`build_report` wrote the report."""

    folder: Path
    html: Path
    markdown: Path
    plots: list[Path]


@dataclass
class Arm:
    """One arm's records as its folder holds them (an arm not run yet has none)."""

    name: str
    """rule, rm or cooper"""
    rows: list[dict[str, float]]
    """the per-step records of metrics.jsonl"""
    final: dict[str, Any] | None
    """final_eval.json: the final policy's benchmark scores"""
    trained: dict[str, Any] | None
    """trained.json: steps and training time"""

    def series(self, key: str) -> tuple[list[int], list[float]]:
        pts = [(int(r["step"]), float(r[key])) for r in self.rows
               if key in r and isinstance(r[key], int | float) and math.isfinite(r[key])]
        return [s for s, _ in pts], [v for _, v in pts]

    @property
    def reward_key(self) -> str:
        return "reward/rule_mean" if self.name == "rule" else "reward/rm_mean"

    @property
    def train_rows(self) -> list[dict[str, float]]:
        return [r for r in self.rows if r.get("step", 0) >= 1 and "reward/rule_mean" in r]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def load_arms(folder: Path, names: list[str]) -> list[Arm]:
    return [Arm(n, _read_jsonl(folder / "arms" / n / "metrics.jsonl"),
                read_json(folder / "arms" / n / "final_eval.json"),
                read_json(folder / "arms" / n / "trained.json")) for n in names]


# ------------------------------------------------------------------ figures (pure functions)

def tail_mean(values: list[float], fraction: float = 0.1) -> float:
    """Mean of the last ``fraction`` of the values (at least one)."""
    if not values:
        return math.nan
    k = max(1, math.ceil(len(values) * fraction))
    return sum(values[-k:]) / k


def second_half_mean(values: list[float]) -> float:
    if not values:
        return math.nan
    half = values[len(values) // 2:]
    return sum(half) / len(half)


def hacking_figures(arm: Arm) -> dict[str, float]:
    """The numbers the issue's acceptance criteria speak of, from the raw per-step records."""
    _, gap = arm.series("hacking/gap")
    _, ver = arm.series("reward/rule_mean")
    _, rew = arm.series(arm.reward_key)
    _, val = arm.series("val/accuracy")
    _, probe = arm.series("val/rm_probe_accuracy")
    _, agree = arm.series("rm/agreement")
    smooth = moving_average(ver, window_for(len(ver))) if ver else []
    peak = max(smooth) if smooth else math.nan
    final_ver = tail_mean(ver)
    return {
        "steps": len(arm.train_rows),
        "final_reward": tail_mean(rew),
        "final_gap": tail_mean(gap),
        "second_half_gap": second_half_mean(gap),
        "peak_verified": peak,
        "final_verified": final_ver,
        "verified_drop": (peak - final_ver) / peak if peak and peak > 0 else math.nan,
        "final_agreement": tail_mean(agree),
        "val_first": val[0] if val else math.nan,
        "val_peak": max(val) if val else math.nan,
        "val_final": val[-1] if val else math.nan,
        "probe_first": probe[0] if probe else math.nan,
        "probe_last": probe[-1] if probe else math.nan,
    }


# ------------------------------------------------------------------ tables

def _pct(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.2f}"


def _num(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{round(x, 3) + 0.0:.3f}"  # no -0.000


def final_table(initial: dict | None, arms: list[Arm]) -> list[list[str]]:
    """Rows: the initial policy and each arm; columns: benchmarks + average (accuracy %)."""
    evals = [("no RL (initial policy)", initial)] + [
        (ARM_LABELS.get(a.name, a.name), a.final) for a in arms]
    names: list[str] = []
    for _, e in evals:
        for b in (e or {}).get("benchmarks", {}):
            if b not in names:
                names.append(b)
    rows = [["policy", *names, "average"]]
    for label, e in evals:
        if e is None:
            rows.append([label, *["not run yet"] * len(names), "not run yet"])
            continue
        b = e["benchmarks"]
        rows.append([label, *[_pct(b[n]["accuracy"]) if n in b else "n/a" for n in names],
                     _pct(e["average"])])
    return rows


FIGURE_ROWS = [
    ("steps", "optimiser steps logged", lambda v: str(int(v))),
    ("final_reward", "training reward, mean of the last 10% of steps", _num),
    ("final_verified", "verified accuracy of the rollouts (reward/rule_mean), last 10% of steps", _num),
    ("peak_verified", "peak of the moving average of that accuracy (window: 10% of the steps)", _num),
    ("verified_drop", "relative drop from that peak to the final value", _num),
    ("final_gap", "hacking/gap, mean of the last 10% of steps", _num),
    ("second_half_gap", "hacking/gap, mean over the second half of the steps", _num),
    ("final_agreement", "rm/agreement with the verifier, last 10% of steps", _num),
    ("val_first", "held-out accuracy before training", _num),
    ("val_peak", "best held-out accuracy", _num),
    ("val_final", "held-out accuracy after the last step", _num),
    ("probe_first", "reward model's probe accuracy, first validation", _num),
    ("probe_last", "reward model's probe accuracy, last validation", _num),
]


def figures_table(arms: list[Arm]) -> list[list[str]]:
    figs = [hacking_figures(a) if a.train_rows else None for a in arms]
    rows = [["figure", *[ARM_LABELS.get(a.name, a.name) for a in arms], "definition"]]
    for key, definition, fmt in FIGURE_ROWS:
        rows.append([key, *[fmt(f[key]) if f else "not run yet" for f in figs], definition])
    return rows


def _md_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows[1:])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# ------------------------------------------------------------------ the report

def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def run_times(setup: dict | None, arms: list[Arm]) -> list[list[str]]:
    rows = [["stage", "time"]]
    total = 0.0
    if setup:
        rows.append(["setup (initial models, probe, initial evaluation)", _duration(setup["seconds"])])
        total += setup["seconds"]
    for a in arms:
        if a.trained:
            rows.append([f"{a.name}: training ({a.trained['steps']} steps)",
                         _duration(a.trained["seconds"])])
            total += a.trained["seconds"]
        if a.final:
            rows.append([f"{a.name}: final evaluation", _duration(a.final["seconds"])])
            total += a.final["seconds"]
    rows.append(["total", _duration(total)])
    return rows


def build_report(folder: str | Path, out: str | Path | None = None) -> ReportPaths:
    """Write the plots, ``report.md`` and ``report.html``; returns where they went."""
    folder = Path(folder)
    settings_file = folder / "experiment.yaml"
    if not settings_file.is_file():
        raise UserError(f"{folder} is not an experiment folder (no experiment.yaml); run "
                        "`cooper experiment hacking --preset NAME --out DIR` first")
    settings = yaml.safe_load(settings_file.read_text())
    status = read_json(folder / "experiment.json") or {}
    setup = read_json(folder / "setup" / "setup.json")
    names = [a.strip() for a in settings["arms"].split(",") if a.strip()]
    arms = load_arms(folder, names)
    report_dir = Path(out) if out else folder / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    plots = make_plots(arms, report_dir)

    table = final_table((setup or {}).get("initial_eval"), arms)
    figures = figures_table(arms)
    times = run_times(setup, arms)
    vers = [["software", "version"]] + [[k, str(v)] for k, v in status.get("versions", {}).items()]
    train = settings["train"]
    summary = [
        ["arms", settings["arms"]],
        ["initial policy", settings["setup"]["policy"]],
        ["initial reward model", f"{settings['setup']['reward_model']}"
         + (f", BCE on {settings['rm_init']['triples']} perturbed {settings['rm_init']['dataset']} "
            f"triples ({settings['rm_init']['epochs']} epoch(s), lr {settings['rm_init']['lr']})"
            if settings["rm_init"]["triples"] else "")],
        ["training data", f"{train['data']['dataset']} ({train['data']['split']})"],
        ["steps", f"{train['max_steps']} x {train['rollout']['prompts_per_step']} prompts x "
                  f"{train['rollout']['samples_per_prompt']} samples"],
        ["policy lr / KL", f"{train['policy']['lr']} / {train['policy']['kl_coef']}"],
        ["reward-model lr (cooper)", str(train["rm_update"]["lr"])],
        ["negatives (cooper)", train["assistant"]["backend"]],
        ["validation", f"{train['validation']['limit']} {train['validation']['dataset']} problems "
                       f"x {train['validation']['samples']} every {train['validation']['every_steps']} steps"],
        ["probe", settings["probe"]["file"] or f"{settings['probe']['triples']} perturbed "
                  f"{settings['probe']['dataset']} ({settings['probe']['split']}) triples"],
        ["seed", str(train["seed"])],
    ]
    if setup and "rm_init" in setup:
        summary.append(["initial RM accuracy on its training triples",
                        _num(setup["rm_init"]["train_accuracy"])])
    if setup:
        summary.append(["initial RM accuracy on the probe", _num(setup["probe_accuracy"])])
    summary = [["setting", "value"]] + summary
    missing = [a.name for a in arms if a.final is None]
    note = (f"Incomplete: {', '.join(missing)} not finished yet; rerun the experiment command "
            "to continue it." if missing else "")

    captions = {
        "heldout_accuracy.png": "Held-out accuracy (verifier-scored, validation protocol) by step.",
        "training_reward.png": "Solid: the reward each arm optimises. Dashed: the verified "
                               "accuracy of the same rollouts. Hacking shows as solid rising "
                               "while dashed falls.",
        "hacking_gap.png": "hacking/gap = reward-model mean minus verifier mean on each step's "
                           "rollouts (the rule arm's reward model is frozen and only watches).",
        "hacking_top_wrong.png": "hacking/top_wrong: of the groups with a verified-correct "
        "rollout, the fraction whose highest reward-model score went to a wrong one. GRPO uses "
        "only the order within a group, so this is the hacking signal a calibration shift "
        "cannot hide.",
        "rm_group_auroc.png": "rm/group_auroc: the reward model's AUROC against the verifier "
        "within each mixed group, averaged (0.5: chance).",
        "rm_probe.png": "The reward model on a fixed labelled probe set: does the online update "
                        "make it forget? (rule and fixed-RM arms: frozen, flat).",
    }
    sections = [
        ("Final accuracy (%)", table,
         "Final policies on the held-out benchmarks (verifier-scored, "
         f"{settings['final_eval']['samples']} samples per problem, T "
         f"{settings['final_eval']['temperature']}, top-p {settings['final_eval']['top_p']})."),
        ("Hacking figures", figures, "From the raw per-step records (metrics.jsonl of each arm)."),
        ("Configuration", summary, f"Full settings: {SETTINGS_NAME}."),
        ("Run time", times, ""),
        ("Versions", vers, ""),
    ]
    md = _markdown(sections, plots, captions, note)
    md_path = report_dir / "report.md"
    md_path.write_text(md)
    html_path = report_dir / "report.html"
    html_path.write_text(_html(sections, plots, captions, note))
    return ReportPaths(report_dir, html_path, md_path, plots)


SETTINGS_NAME = "experiment.yaml in the experiment folder"
TITLE = "Reward hacking: rule vs. fixed reward model vs. Cooper"


def _markdown(sections, plots, captions, note) -> str:
    parts = [f"# {TITLE}\n"]
    if note:
        parts.append(f"**{note}**\n")
    for title, rows, text in sections[:2]:
        parts += [f"## {title}\n", text + "\n" if text else "", _md_table(rows) + "\n"]
    parts.append("## Curves\n")
    for p in plots:
        parts += [f"![{p.stem}]({p.name})\n", captions.get(p.name, "") + "\n"]
    for title, rows, text in sections[2:]:
        parts += [f"## {title}\n", text + "\n" if text else "", _md_table(rows) + "\n"]
    return "\n".join(x for x in parts if x)


CSS = """body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222;
background:#fff}table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #bbb;
padding:.3em .6em;text-align:left}th{background:#eef2f7}img{max-width:100%;border:1px solid #ddd}
.note{background:#fff3cd;padding:.5em 1em;border:1px solid #e0c97f}figcaption{color:#555;
margin-bottom:1.5em}"""


def _html(sections, plots, captions, note) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(TITLE)}</title>"
             f"<style>{CSS}</style></head><body><h1>{e(TITLE)}</h1>"]
    if note:
        parts.append(f"<p class='note'>{e(note)}</p>")
    for title, rows, text in sections[:2]:
        parts += [f"<h2>{e(title)}</h2>", f"<p>{e(text)}</p>" if text else "", _html_table(rows)]
    parts.append("<h2>Curves</h2>")
    for p in plots:
        data = base64.b64encode(p.read_bytes()).decode("ascii")
        parts.append(f"<figure><img alt='{e(p.stem)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{e(captions.get(p.name, ''))}</figcaption></figure>")
    for title, rows, text in sections[2:]:
        parts += [f"<h2>{e(title)}</h2>", f"<p>{e(text)}</p>" if text else "", _html_table(rows)]
    parts.append("</body></html>\n")
    return "".join(parts)

"""Outputs of a simulation run: metrics.json, jobs.csv, PNG plots, report.md and report.html.
Numbers are written first; plots and reports are made from those numbers."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from scheduler.simulation.metrics import bucket_order, time_metrics
from scheduler.simulation.protocol import HEADLINE, Ratio
from scheduler.simulation.protocol import table as protocol_table
from scheduler.simulation.records import SimResult

# (metric key, heading, format) for the comparison table in the terminal and the reports
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("jct_mean_s", "JCT mean h", "h"),
    ("jct_p99_s", "JCT p99 h", "h"),
    ("queue_delay_mean_s", "wait mean h", "h"),
    ("gpu_utilisation", "util", "%"),
    ("racks_per_multihost_gang_mean", "racks/gang", ".2f"),
    ("spines_per_multihost_gang_mean", "spines/gang", ".2f"),
    ("cross_rack_gb", "x-rack TB", "T"),
    ("cross_spine_gb", "x-spine TB", "T"),
    ("stranded_free_gpus_mean", "stranded GPUs", ".0f"),
    ("decision_latency_p99_ms", "decide p99 ms", ".1f"),
    ("jobs_unplaced", "unplaced", "d"),
)


def fmt(value: float, how: str) -> str:
    if how == "h":
        return f"{value / 3600:.2f}"
    if how == "%":
        return f"{value:.1%}"
    if how == "T":
        return f"{value / 1000:.1f}"
    if how == "d":
        return f"{int(value)}"
    return format(value, how)


def write_metrics(
    out: Path,
    scenario: dict[str, Any],
    metrics: dict[str, Any],
    per_seed: dict[str, list[dict[str, Any]]],
    headline: list[Ratio],
) -> None:
    seeds = {
        p: [{m.key: m.value(run) for m in HEADLINE} for run in runs] for p, runs in per_seed.items()
    }
    ratio_rows = [
        {"measure": r.measure.key, "baseline": r.baseline, "mean": r.mean, "half_width_95": r.half}
        for r in headline
    ]
    body = {"scenario": scenario, "policies": metrics, "per_seed": seeds, "headline": ratio_rows}
    (out / "metrics.json").write_text(json.dumps(body, indent=2, sort_keys=True))


JOB_FIELDS = (
    "policy",
    "job",
    "pool",
    "gpus",
    "pods",
    "submit_s",
    "start_s",
    "finish_s",
    "jct_s",
    "queue_delay_s",
    "slowdown",
    "hosts",
    "racks",
    "spines",
    "restarts",
    "cross_rack_gb",
    "cross_spine_gb",
)


def write_jobs(out: Path, results: list[SimResult]) -> None:
    with (out / "jobs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(JOB_FIELDS)
        for result in results:
            for j in result.jobs:
                d = j.last_domains
                writer.writerow(
                    [
                        result.policy,
                        j.job.id,
                        j.gang.pool,
                        j.gang.gpus,
                        j.gang.pods,
                        f"{j.job.submit_s:.0f}",
                        _opt(j.first_start),
                        _opt(j.finish),
                        _opt(None if j.finish is None else j.finish - j.job.submit_s),
                        _opt(None if j.first_start is None else j.first_start - j.job.submit_s),
                        f"{j.stretch:.3f}",
                        d.get("host", ""),
                        d.get("rack", ""),
                        d.get("spine", ""),
                        j.restarts,
                        f"{j.rack_gb:.1f}",
                        f"{j.spine_gb:.1f}",
                    ]
                )


def _opt(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def write_plots(out: Path, results: list[SimResult]) -> list[str]:
    by_size = {r.policy: time_metrics(r)["by_size"] for r in results}
    return [
        _by_size(out, by_size, "slowdown_mean", "slowdown (actual / ideal run time)", "slowdown"),
        _by_size(out, by_size, "queue_delay_mean_s", "mean wait (h)", "queueing", 3600),
        _bytes(out, results),
        _utilisation(out, results),
        _spread(out, results),
    ]


def _by_size(
    out: Path, by_size: dict[str, dict[str, Any]], key: str, label: str, name: str, scale: float = 1
) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    buckets = sorted({b for sizes in by_size.values() for b in sizes}, key=bucket_order)
    width = 0.8 / max(len(by_size), 1)
    for k, (policy, sizes) in enumerate(by_size.items()):
        values = [sizes.get(b, {}).get(key, 0.0) / scale for b in buckets]
        ax.bar([i + k * width for i in range(len(buckets))], values, width, label=policy)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(buckets))], buckets)
    ax.set(xlabel="gang size (GPUs)", ylabel=label, title=f"{name.capitalize()} by gang size")
    ax.legend(fontsize=7)
    return _save(fig, out, f"{name}_by_size.png")


def _utilisation(out: Path, results: list[SimResult]) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        total = sum(r.pool_gpus.values())
        busy: dict[str, int] = {}
        xs, ys = [], []
        step = max(len(r.busy) // 2000, 1)
        for i, (at, pool, value) in enumerate(r.busy):
            busy[pool] = value
            if i % step == 0:
                xs.append(at / 3600)
                ys.append(sum(busy.values()) / total)
        ax.plot(xs, ys, label=r.policy, linewidth=0.8)
    ax.set(
        xlabel="simulated time (h)",
        ylabel="share of all GPUs busy (0-1)",
        title="GPU utilisation over time (trace jobs, all pools)",
        ylim=(0, 1.05),
    )
    ax.legend(fontsize=8)
    return _save(fig, out, "utilisation.png")


def _spread(out: Path, results: list[SimResult]) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = sorted({j.gang.gpus for r in results for j in r.jobs if j.gang.gpus > 8})
    width = 0.8 / max(len(results), 1)
    for k, r in enumerate(results):
        means = []
        for size in sizes:
            racks = [
                j.last_domains["rack"] for j in r.jobs if j.gang.gpus == size and j.last_domains
            ]
            means.append(sum(racks) / len(racks) if racks else 0)
        ax.bar([i + k * width for i in range(len(sizes))], means, width, label=r.policy)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(sizes))], [str(s) for s in sizes])
    ax.set(xlabel="gang size (GPUs)", ylabel="racks spanned (mean)", title="Spread per gang size")
    ax.legend(fontsize=8)
    return _save(fig, out, "spread.png")


def _bytes(out: Path, results: list[SimResult]) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    names = [r.policy for r in results]
    rack = [sum(j.rack_gb for j in r.jobs) / 1000 for r in results]
    spine = [sum(j.spine_gb for j in r.jobs) / 1000 for r in results]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], rack, 0.4, label="cross-rack")
    ax.bar([x + 0.2 for x in xs], spine, 0.4, label="cross-spine")
    ax.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="TB crossing the tier", title="Traffic per fabric tier")
    ax.legend(fontsize=8)
    return _save(fig, out, "cross_fabric_bytes.png")


def _save(fig: Any, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def rows(metrics: dict[str, Any]) -> list[list[str]]:
    return [
        [policy, *(fmt(m[key], how) for key, _, how in COLUMNS)] for policy, m in metrics.items()
    ]


def write_reports(
    out: Path,
    title: str,
    notes: list[str],
    per_seed: dict[str, list[dict[str, Any]]],
    headline: list[Ratio],
    plots: list[str],
) -> None:
    header = ["policy", *(m.heading for m in HEADLINE)]
    body = protocol_table(per_seed)
    seeds = len(next(iter(per_seed.values()), []))
    md = [f"# rackwise simulation: {title}", "", *notes, ""]
    md += [f"Mean ±95% interval over {seeds} seed(s):", ""]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in body]
    md += ["", "rackwise over the best baseline on each measure (paired per-seed ratios):", ""]
    md += [f"- {r.text()}" for r in headline]
    md += ["", "## What each measure means", ""]
    md += [f"- **{m.heading}**: {m.definition}" for m in HEADLINE]
    md += [
        "",
        "Per pool figures are in `metrics.json`; one row per job per policy (first seed) in "
        "`jobs.csv`. Plots show the first seed.",
        "",
    ]
    md += [f"![{p}]({p})" for p in plots]
    (out / "report.md").write_text("\n".join(md) + "\n")
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    items = "".join(f"<li>{html.escape(r.text())}</li>" for r in headline)
    terms = "".join(
        f"<dt>{html.escape(m.heading)}</dt><dd>{html.escape(m.definition)}</dd>" for m in HEADLINE
    )
    imgs = "".join(f'<img src="{p}" alt="{p}" style="max-width:48%">' for p in plots)
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>"
        f"<h1>rackwise simulation: {html.escape(title)}</h1>"
        + "".join(f"<p>{html.escape(n)}</p>" for n in notes)
        + f"<p>Mean ±95% interval over {seeds} seed(s).</p>"
        + f"<table><tr>{cells}</tr>{trs}</table><ul>{items}</ul><dl>{terms}</dl>{imgs}"
        + "</body></html>"
    )
    (out / "report.html").write_text(page)

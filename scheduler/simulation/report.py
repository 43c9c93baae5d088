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

from scheduler.simulation.engine import SimResult

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


def write_metrics(out: Path, scenario: dict[str, Any], metrics: dict[str, Any]) -> None:
    (out / "metrics.json").write_text(
        json.dumps({"scenario": scenario, "policies": metrics}, indent=2, sort_keys=True)
    )


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
    names = [_jct_cdf(out, results), _utilisation(out, results), _spread(out, results)]
    names.append(_bytes(out, results))
    return names


def _jct_cdf(out: Path, results: list[SimResult]) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        jct = sorted(j.finish - j.job.submit_s for j in r.jobs if j.finish is not None)
        if jct:
            ax.plot(
                [max(x / 3600, 1e-3) for x in jct],
                [i / len(jct) for i in range(len(jct))],
                label=r.policy,
            )
    ax.set(xscale="log", xlabel="job completion time (h)", ylabel="share of jobs", title="JCT CDF")
    ax.legend(fontsize=8)
    return _save(fig, out, "jct_cdf.png")


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
        ylabel="GPUs busy",
        title="GPU utilisation over time",
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
    ax.set(ylabel="TB", title="Cross-fabric traffic per policy")
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
    out: Path, title: str, notes: list[str], metrics: dict[str, Any], plots: list[str]
) -> None:
    header = ["policy", *(h for _, h, _ in COLUMNS)]
    body = rows(metrics)
    md = [f"# rackwise simulation: {title}", "", *notes, ""]
    md += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in body]
    md += [
        "",
        "Per pool figures are in `metrics.json`; one row per job per policy in `jobs.csv`.",
        "",
    ]
    md += [f"![{p}]({p})" for p in plots]
    (out / "report.md").write_text("\n".join(md) + "\n")
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
    imgs = "".join(f'<img src="{p}" alt="{p}" style="max-width:48%">' for p in plots)
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style></head><body>"
        f"<h1>rackwise simulation: {html.escape(title)}</h1>"
        + "".join(f"<p>{html.escape(n)}</p>" for n in notes)
        + f"<table><tr>{cells}</tr>{trs}</table>{imgs}</body></html>"
    )
    (out / "report.html").write_text(page)

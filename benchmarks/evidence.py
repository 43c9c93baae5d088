"""The README's evidence table and docs/evidence.md, written from saved comparisons.

Each `docs/evidence/<scenario>.json` is what `rackwise compare <scenario> --json` wrote (its
setup, seeds, date and code digest, every row's measures per seed, the paired ratios). This
script renders them: one short table per scenario for the README (between the markers
`<!-- evidence:begin -->` and `<!-- evidence:end -->`), and every measure of every row for
docs/evidence.md. No figure is typed by hand, so none can drift from a run; a test keeps the
README's block equal to what this renders.

    python -m benchmarks.evidence           # print the README block
    python -m benchmarks.evidence --write   # rewrite the README block and docs/evidence.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from scheduler.cli.protocol_view import brief_cell as cell
from scheduler.simulation.protocol import HEADLINE, Measure

REPO = Path(__file__).resolve().parents[1]
SAVED = REPO / "docs" / "evidence"
README = REPO / "README.md"
PAGE = REPO / "docs" / "evidence.md"
BEGIN, END = "<!-- evidence:begin -->", "<!-- evidence:end -->"

Doc = dict[str, Any]


def documents() -> list[Doc]:
    return [json.loads(p.read_text()) for p in sorted(SAVED.glob("*.json"))]


def caption(doc: Doc) -> str:
    scenario = doc["setup"]["scenario"]
    return (
        f"`{scenario['name']}`: {len(doc['seeds'])} seeds, offered load {scenario['load']:.0%}, "
        f"run {doc['date']} (code {doc['code'][:12]})"
    )


def measure(key: str) -> Measure:
    return next(m for m in HEADLINE if m.key == key)


def values(doc: Doc, row: str, m: Measure) -> list[float | None]:
    return [m.value(run) for run in doc["rows"][row]]


def ratio(doc: Doc, key: str) -> Doc | None:
    return next((r for r in doc["ratios"] if r["measure"] == key), None)


def short_table(doc: Doc) -> list[str]:
    """rackwise against the best configured peer on every measure of the protocol."""
    lines = [
        caption(doc),
        "",
        "| measure | rackwise | best configured peer | rackwise / peer, paired, 95% |",
        "| --- | --- | --- | --- |",
    ]
    for m in HEADLINE:
        found = ratio(doc, m.key)
        if found is None:
            continue
        peer = found["baseline"]
        ours = cell(values(doc, "rackwise", m), m.scale)
        theirs = cell(values(doc, peer, m), m.scale)
        paired = f"{found['mean']:.3f}x ±{found['half_width_95']:.3f} ({found['verdict']})"
        lines.append(f"| {m.heading} | {ours} | {peer}: {theirs} | {paired} |")
    return lines


def readme_block() -> str:
    body: list[str] = []
    for doc in documents():
        body += [*short_table(doc), ""]
    return "\n".join([BEGIN, *body, END])


def page() -> str:
    """Every row, every measure, every ratio of every saved comparison."""
    out = [
        "# Evidence",
        "",
        "After reading this page you will know what each saved comparison measured, on what, "
        "when and with which code, and how rackwise stands against each peer configured as "
        "its users configure it. Written by `python -m benchmarks.evidence --write` from "
        "`docs/evidence/*.json` (each saved by `rackwise compare <scenario> --json`); the "
        "measures are defined in docs/simulator.md.",
        "",
    ]
    for doc in documents():
        out += [f"## {doc['setup']['scenario']['name']}", "", caption(doc), "", "Rows:", ""]
        out += [f"- `{row}`: {text}" for row, text in doc["described"].items()]
        heads = [m.heading for m in HEADLINE]
        out += ["", "| row | " + " | ".join(heads) + " |", "|" + " --- |" * (len(heads) + 1)]
        for row in doc["rows"]:
            cells = [cell(values(doc, row, m), m.scale) for m in HEADLINE]
            out.append(f"| {row} | " + " | ".join(cells) + " |")
        out += ["", "rackwise over the best configured peer on each measure (paired per seed):", ""]
        for r in doc["ratios"]:
            m = measure(r["measure"])
            out.append(
                f"- {m.heading}: {r['mean']:.3f}x ±{r['half_width_95']:.3f} vs {r['baseline']} "
                f"({r['verdict']})"
            )
        out.append("")
    return "\n".join(out)


def write() -> None:
    text = README.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + readme_block() + tail)
    PAGE.write_text(page())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.write:
        write()
    else:
        print(readme_block())


if __name__ == "__main__":
    main()

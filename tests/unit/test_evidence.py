"""No figure of the README's evidence is typed by hand: its block and docs/evidence.md are what
`python -m benchmarks.evidence` renders from the saved comparisons in docs/evidence/."""

from __future__ import annotations

from benchmarks import evidence


def test_the_readme_evidence_is_what_the_saved_comparisons_render():
    readme = evidence.README.read_text()
    start, end = readme.index(evidence.BEGIN), readme.index(evidence.END) + len(evidence.END)
    assert readme[start:end] == evidence.readme_block()
    assert evidence.PAGE.read_text() == evidence.page()


def test_every_saved_comparison_names_its_date_code_seeds_and_rows():
    docs = evidence.documents()
    assert docs
    for doc in docs:
        assert doc["date"]
        assert len(doc["code"]) == 64
        assert len(doc["seeds"]) >= 3
        assert set(doc["described"]) == set(doc["rows"])
        assert "rackwise" in doc["rows"]

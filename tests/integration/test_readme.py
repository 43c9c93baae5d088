"""The README's and the docs' examples run as written: every YAML block of README.md and
docs/*.md is applied to a cluster of the README's dev topology (simulations/topologies/dev.yaml)
and reaches the state the page describes. A `spec:` fragment is completed into a TrainingJob (a
busybox template, 8 GPUs per replica unless it says otherwise); a manifest goes as it is; the
operator-config block is read as the operator reads its config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.controller.config import OperatorConfig
from scheduler.topology import load_topology
from tests.integration.conftest import Env, reset, training_job
from tests.integration.test_podgroups import bound

pytestmark = pytest.mark.apiserver
REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TEXT = "\n".join(page.read_text() for page in PAGES)
BLOCKS = [yaml.safe_load_all(b) for b in re.findall(r"```yaml\n(.*?)```", TEXT, re.S)]
DOCS = [[d for d in docs if d] for docs in BLOCKS]


def kind_of(docs: list[dict[str, Any]]) -> str:
    if docs[0].keys() & {"levels", "pools", "scheduling"}:  # the operator's config
        return "config"
    if "spec" in docs[0] and "kind" not in docs[0]:
        return "fragment"
    return "manifests"


def test_the_readme_has_examples_of_each_kind():
    assert {kind_of(d) for d in DOCS} == {"config", "fragment", "manifests"}


@pytest.mark.parametrize("index", range(len(DOCS)))
def test_each_readme_example_reaches_the_state_the_readme_shows(env: Env, index: int):
    docs = DOCS[index]
    kind = kind_of(docs)
    if kind == "config":
        OperatorConfig.model_validate(docs[0])  # the operator reads it, levels and all
        return
    reset(env, load_topology(REPO / "simulations" / "topologies" / "dev.yaml"))
    if kind == "fragment":
        name = f"readme-{index}"
        job = training_job(name, 1)
        job["spec"] |= docs[0]["spec"]
        env.post(job)
        env.wait_placed(name)
        return
    for doc in docs:
        env.apply(doc)
    for doc in docs:
        if doc["kind"] == "TrainingJob":
            env.wait_placed(doc["metadata"]["name"])
        if doc["kind"] == "PodGroup":
            group, size = doc["metadata"]["name"], doc["spec"]["minMember"]
            env.wait(f"{group} bound", lambda g=group, n=size: bound(env, g, n))

"""Manifests stay correct even where they cannot run: kustomize renders, samples validate
against the CRD's schema, the kind config labels every worker. kind itself needs Docker."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"


def render(target: str) -> list[dict]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(MANIFESTS / target)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def crd_schema() -> dict:
    crd = yaml.safe_load((MANIFESTS / "base/crds/trainingjob.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("target", ["base", "overlays/kind"])
def test_kustomize_renders(target):
    kinds = {d["kind"] for d in render(target)}
    assert {"CustomResourceDefinition", "ClusterRole", "Deployment", "ConfigMap"} <= kinds


def test_kind_overlay_uses_the_loaded_image():
    [deploy] = [d for d in render("overlays/kind") if d["kind"] == "Deployment"]
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "rackwise:dev"
    assert container["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize("sample", sorted((MANIFESTS / "samples").glob("*.yaml")), ids=str)
def test_samples_validate_against_the_crd_schema(sample):
    jsonschema.validate(yaml.safe_load(sample.read_text()), crd_schema())


def test_schema_rejects_what_the_api_server_would():
    bad = yaml.safe_load((MANIFESTS / "samples/training-job.yaml").read_text())
    bad["spec"]["replicas"] = 0  # pool and level names are the operator's config, not the schema's
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd_schema())


def test_kind_workers_carry_topology_and_pool_labels():
    config = yaml.safe_load((MANIFESTS / "kind/cluster.yaml").read_text())
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    assert len(workers) == 8
    for worker in workers:
        assert {"rackwise.io/spine", "rackwise.io/rack", "rackwise.io/pool"} <= set(
            worker["labels"]
        )


def docker_running() -> bool:
    if not shutil.which("docker") or not shutil.which("kind"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


@pytest.mark.kind
@pytest.mark.skipif(not docker_running(), reason="kind needs a Docker engine; none here")
def test_kind_cluster_places_the_samples():
    subprocess.run(["kubectl", "apply", "-f", str(MANIFESTS / "samples")], check=True)
    for name in ("llm-pretrain", "nightly-embeddings", "chat-serving"):
        subprocess.run(
            ["kubectl", "wait", f"tj/{name}", "--for=condition=Placed", "--timeout=120s"],
            check=True,
        )


def test_shipped_config_map_is_a_valid_operator_config():
    from scheduler.controller.config import OperatorConfig

    config_map = yaml.safe_load((MANIFESTS / "base/config.yaml").read_text())
    config = OperatorConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.labels.rack == "rackwise.io/rack"
    assert config.gpu_resource == "nvidia.com/gpu"


def test_deployment_is_hardened_and_replicated():
    [deploy] = [d for d in render("base") if d["kind"] == "Deployment"]
    spec = deploy["spec"]
    assert spec["replicas"] == 2  # one leader, one standby
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork")
    [container] = pod["containers"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_IP": "status.podIP"}


def test_operator_rbac_is_namespaced_for_writes():
    docs = render("base")
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    reads = {v for rule in roles["rackwise-operator"]["rules"] for v in rule["verbs"]}
    assert reads == {"list", "watch"}  # cluster-wide: reads only
    # but the status and finalizer of team Queues, cluster-scoped objects: that and nothing else
    queues = roles["rackwise-queues"]["rules"]
    assert queues == [
        {"apiGroups": ["rackwise.io"], "resources": ["queues/status"], "verbs": ["patch"]},
        {"apiGroups": ["rackwise.io"], "resources": ["queues"], "verbs": ["patch"]},
    ]
    writes = roles["rackwise-workloads"]
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert {b["metadata"]["namespace"] for b in bindings} == {"default", "rackwise-system"}
    assert not any(
        d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == "rackwise-workloads"
        for d in docs
    )
    assert any("pods" in r["resources"] and "create" in r["verbs"] for r in writes["rules"])


def undescribed(node: dict, path: str = "") -> list[str]:
    out = [] if node.get("description") or not path else [path]
    for key, child in (node.get("properties") or {}).items():
        out += undescribed(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        out += undescribed(node["items"], f"{path}[]")
    return out


@pytest.mark.parametrize("crd", ["trainingjob.yaml", "podgroup.yaml", "queue.yaml"])
def test_every_schema_field_says_what_it_means(crd):
    """`kubectl explain` prints sentences for every field, not just a type."""
    doc = yaml.safe_load((MANIFESTS / "base/crds" / crd).read_text())
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert undescribed(schema) == []


def test_the_image_build_copies_what_exists_and_pins_every_runtime_dependency():
    """No Docker here: the Dockerfile's sources must exist and its lock must pin (==) every
    dependency pyproject.toml names, so the image installs exactly what was tested."""
    import re
    import tomllib

    dockerfile = (REPO / "operator" / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (?!--from)(\S+)", dockerfile, re.M):
        assert (REPO / source).exists(), source
    assert len(re.findall(r"^FROM python:3\.11\.\d+-slim-\w+", dockerfile, re.M)) == 2
    lock = {
        line.split("==")[0].lower().replace("_", "-")
        for line in (REPO / "operator" / "requirements.lock").read_text().splitlines()
        if "==" in line
    }
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["cluster"]]
    names = {re.split(r"[<>=\[ ]", d)[0].lower().replace("_", "-") for d in wanted}
    # plots only (`rackwise simulate`): the image leaves them out, import-linter keeps the
    # operator's modules from importing them
    assert names - {"matplotlib"} <= lock
    assert "matplotlib" not in lock

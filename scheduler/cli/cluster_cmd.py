"""`rackwise operator` and `rackwise dev-cluster up|down|kubelet`: adapters over controller/."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli.errors import fail
from scheduler.cli.inputs import snapshot_from

DEFAULT_DIR = Path(".rackwise-dev")
dev = typer.Typer(
    help="A local control plane (etcd, kube-apiserver, controllers, default scheduler) with fake"
    " nodes.",
    no_args_is_help=True,
    add_completion=False,
)


def operator_cmd(
    kubeconfig: Annotated[Path | None, typer.Option(help="default: in-cluster config")] = None,
    config: Annotated[
        Path | None, typer.Option(help="config.yaml of the rackwise-config map")
    ] = None,
    port: Annotated[int | None, typer.Option(help="metrics and probes port (0: any free)")] = 8080,
    resync: Annotated[float | None, typer.Option(help="seconds between full resyncs")] = None,
    bind_address: Annotated[
        str, typer.Option(envvar="POD_IP", help="address for metrics and probes (the pod's IP)")
    ] = "127.0.0.1",
) -> None:
    """Run the operator: place TrainingJobs as gangs and bind their pods."""
    from scheduler.controller.config import load_config
    from scheduler.controller.operator import run

    settings = load_config(config)
    if resync is not None:
        settings = settings.model_copy(update={"resync_s": resync})
    run(settings, kubeconfig, port, host=bind_address)


@dev.command("up")
def up_cmd(
    topology: Annotated[Path, typer.Option(help="YAML topology or Lingjun CSV")],
    workdir: Annotated[Path, typer.Option("--dir", help="state folder")] = DEFAULT_DIR,
) -> None:
    """Start etcd, kube-apiserver, kube-controller-manager and kube-scheduler, install CRDs and
    RBAC, create nodes, start the operator."""
    from scheduler.devtools.cluster import ClusterError
    from scheduler.devtools.devcluster import up

    spec = snapshot_from(topology).fabric.spec
    try:
        cluster = up(workdir.resolve(), spec)
    except ClusterError as exc:
        fail(str(exc))
    typer.echo(f"rackwise dev cluster up: {len(spec.hosts)} nodes at {cluster.server}")
    typer.echo(f"export KUBECONFIG={cluster.admin_kubeconfig}")


@dev.command("down")
def down_cmd(
    workdir: Annotated[Path, typer.Option("--dir", help="state folder")] = DEFAULT_DIR,
) -> None:
    """Stop everything `up` started."""
    from scheduler.devtools.devcluster import down

    typer.echo("stopped" if down(workdir.resolve()) else f"no dev cluster in {workdir}")


@dev.command("kubelet")
def kubelet_cmd(kubeconfig: Annotated[Path, typer.Option(help="admin kubeconfig")]) -> None:
    """Mark bound pods Running (there is no real kubelet in the dev cluster)."""
    from scheduler.controller.runtime.gateway import AdminGateway
    from scheduler.devtools.fake import run_kubelet

    run_kubelet(AdminGateway(kubeconfig), threading.Event())

"""`rackwise` entry point."""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import cluster_cmd, compare_cmd, place_cmd, simulate_cmd, topology_cmd
from scheduler.cli.entry import version_line
from scheduler.cli.errors import run_cli

app = typer.Typer(
    help="rackwise: topology-aware gang placement for AI clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(topology_cmd.app, name="topology")
app.command("place")(place_cmd.place_cmd)
app.command("simulate")(simulate_cmd.simulate_cmd)
app.command("compare")(compare_cmd.compare_cmd)
app.command("operator")(cluster_cmd.operator_cmd)
app.add_typer(cluster_cmd.dev, name="dev-cluster")


def _version(wanted: bool) -> None:
    if wanted:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print and exit")
    ] = False,
) -> None:
    """rackwise: topology-aware gang placement for AI clusters."""


def main() -> None:
    run_cli(typer.main.get_command(app))


if __name__ == "__main__":
    main()

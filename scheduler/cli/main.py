"""`rackwise` entry point."""

from __future__ import annotations

import typer

from scheduler.cli import cluster_cmd, place_cmd, simulate_cmd, topology_cmd
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
app.command("operator")(cluster_cmd.operator_cmd)
app.add_typer(cluster_cmd.dev, name="dev-cluster")


def main() -> None:
    run_cli(typer.main.get_command(app))


if __name__ == "__main__":
    main()

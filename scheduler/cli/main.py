"""`rackwise` entry point. Each command's module (and the solver, simulator and plotting
libraries it imports) is loaded only when that command runs, so `rackwise --help` answers in a
fraction of a second; the listing's one-line helps are kept here (a test checks they are the
commands' own)."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer
from typer._click import Command, Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup

from scheduler.cli.entry import version_line
from scheduler.cli.errors import run_cli

# name -> (module, attribute: a Typer app or a command function, the one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "topology": ("scheduler.cli.topology_cmd", "app", "Generate and inspect fabric topologies."),
    "place": (
        "scheduler.cli.place_cmd",
        "place_cmd",
        "Place gangs on a topology and print hosts, ranks, domains, cost, bound, gap and time.",
    ),
    "simulate": (
        "scheduler.cli.simulate_cmd",
        "simulate_cmd",
        "Simulate a scenario with every policy and compare them side by side.",
    ),
    "compare": (
        "scheduler.cli.compare_cmd",
        "compare_cmd",
        "Every policy on the same jobs and queue rules, several seeds, 95% intervals, the oracle"
        " beside them; rackwise over the best baseline on each measure.",
    ),
    "samples": (
        "scheduler.cli.samples_cmd",
        "samples_cmd",
        "Write the sample TrainingJobs (training, batch and online inference) into a directory.",
    ),
    "operator": (
        "scheduler.cli.cluster_cmd",
        "operator_cmd",
        "Run the operator: place TrainingJobs as gangs and bind their pods.",
    ),
    "dev-cluster": (
        "scheduler.cli.cluster_cmd",
        "dev",
        "A local control plane (etcd, kube-apiserver, controllers, default scheduler) with fake"
        " nodes.",
    ),
}


def load(name: str) -> Command:
    """The command itself, its module imported now."""
    module, attribute, _ = COMMANDS[name]
    found = getattr(importlib.import_module(module), attribute)
    if isinstance(found, typer.Typer):
        return typer.main.get_command(found)
    single = typer.Typer(add_completion=False)
    single.command(name)(found)
    return typer.main.get_command(single)


class LazyGroup(TyperGroup):
    """Commands loaded when they run; the help listing uses the one-line helps above."""

    listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        if self.listing:
            return TyperCommand(name=cmd_name, help=COMMANDS[cmd_name][2])
        return load(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> Any:
        self.listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(
    cls=LazyGroup,
    help="rackwise: topology-aware gang placement for AI clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


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

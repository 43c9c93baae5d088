"""`rackwise samples DIR`: the sample TrainingJobs (manifests/samples), written out from the
copy the wheel carries, for `kubectl apply -f DIR`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from scheduler.bundled import bundled
from scheduler.cli.errors import fail


def samples_cmd(
    directory: Annotated[Path, typer.Argument(help="where to write them (made if missing)")],
    force: Annotated[bool, typer.Option(help="overwrite files of the same names")] = False,
) -> None:
    """Write the sample TrainingJobs (training, batch and online inference) into a directory."""
    sources = sorted(bundled("manifests/samples").glob("*.yaml"))
    clashes = [s.name for s in sources if (directory / s.name).exists()]
    if clashes and not force:
        fail(f"{directory}: {', '.join(clashes)} exist already (--force overwrites)")
    directory.mkdir(parents=True, exist_ok=True)
    for source in sources:
        shutil.copyfile(source, directory / source.name)
        typer.echo(str(directory / source.name))

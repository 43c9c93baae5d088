"""The `rackwise` script: `--version` answers before any command module (and the solver and
plotting libraries they import) is loaded; everything else goes to the full CLI."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version


def version_line() -> str:
    try:
        return f"rackwise {version('rackwise')}"
    except PackageNotFoundError:  # a checkout run without installing
        return "rackwise (not installed)"


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return
    from scheduler.cli.main import main as full

    full()

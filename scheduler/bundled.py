"""Files rackwise ships beside its code (the default scenario and its data, the manifests, the
control-plane build script): read from the checkout when run from one, else from the copy the
wheel carries in scheduler/bundled/ (setup.py)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
CHECKOUT = PACKAGE.parent


def bundled(relative: str) -> Path:
    """`relative` is a path from the repository root, e.g. "manifests/base"."""
    installed = PACKAGE / "bundled" / relative
    return installed if installed.exists() else CHECKOUT / relative

"""The package's bundled files: the default scenario with its traces and topologies, the
operator's manifests and the control-plane build script, copied from the checkout into
scheduler/bundled/ of the wheel, so an installed `rackwise` finds them (scheduler/bundled.py)
and the repository keeps one copy of each."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = (
    "simulations/scenarios",
    "simulations/traces",
    "simulations/topologies",
    "manifests/base",
    "manifests/samples",
    "scripts/build-kube.sh",
    "scripts/build-apiserver.sh",
    "scripts/deb-src.py",
)


class WithBundled(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "scheduler" / "bundled"
        for item in BUNDLED:
            source, dest = root / item, target / item
            if source.is_dir():
                shutil.copytree(source, dest, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)


setup(cmdclass={"build_py": WithBundled})

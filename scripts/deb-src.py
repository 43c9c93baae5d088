"""Print a deb-src entry mirroring the machine's first non-security deb source (deb822 stanza or
one-line format, as found), so build-apiserver.sh never names a mirror of its own."""

from __future__ import annotations

import glob
import sys


def from_deb822() -> str | None:
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        with open(path) as handle:
            stanzas = handle.read().split("\n\n")
        for stanza in stanzas:
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line:
                    continue
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
            if "deb" in fields.get("Types", "").split() and "security" not in fields.get(
                "URIs", ""
            ):
                fields["Types"] = "deb-src"
                return "\n".join(f"{k}: {v}" for k, v in fields.items())
    return None


def from_one_line() -> str | None:
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        try:
            with open(path) as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("deb ") and "security" not in line:
                return "deb-src " + line[4:]
    return None


entry = from_deb822() or from_one_line()
if entry is None:
    sys.exit(1)
print(entry)

"""The software stack a run used, against the verified one pinned in constraints.txt.

Records and `archbench info` name the versions of the packages archbench depends on, and say
whether the installed stack is the pinned one (which packages differ, if any).
"""

from __future__ import annotations

import functools
import hashlib
import re
from importlib import metadata
from pathlib import Path

CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints.txt"
# The packages archbench itself imports (their dependencies are pinned too, but not listed here).
DIRECT = (
    "tensorflow-cpu",
    "tensorflow",
    "keras",
    "horovod",
    "mpi4py",
    "numpy",
    "pandas",
    "matplotlib",
    "scipy",
    "PyYAML",
    "pymetis",
    "protobuf",
    "grpcio",
)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def pinned() -> dict[str, str]:
    """name -> version of every `name==version` line of constraints.txt (empty when absent)."""
    try:
        text = CONSTRAINTS.read_text()
    except OSError:
        return {}
    pins = {}
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[_normal(match.group(1))] = match.group(2)
    return pins


@functools.lru_cache(maxsize=1)
def stack() -> dict:
    """{packages: {name: version} of DIRECT, constraints: {sha256, differs: [name have!=pinned]}}."""
    packages = {name: version for name in DIRECT if (version := installed_version(name))}
    pins = pinned()
    differs = []
    for name, version in sorted(pins.items()):
        have = installed_version(name)
        if have != version:
            differs.append(f"{name} {have or 'missing'} != {version}")
    constraints = None
    if pins:
        digest = hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest()[:12]
        constraints = {"sha256": digest, "pinned": len(pins), "differs": differs}
    return {"packages": packages, "constraints": constraints}

"""The pinned stack: constraints.txt holds exact versions, setup installs with it, runs name it."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO

from archbench.runtime.stack import CONSTRAINTS, DIRECT, pinned, stack


def test_every_package_archbench_imports_is_pinned_exactly():
    pins = pinned()
    assert pins["tensorflow-cpu"] == "2.15.1" and pins["horovod"] == "0.28.1"
    for name in DIRECT:
        if name != "tensorflow":  # the GPU build, installed instead of tensorflow-cpu
            assert re.sub(r"[-_.]+", "-", name).lower() in pins, name
    assert "archbench" not in pins
    lines = [line for line in CONSTRAINTS.read_text().splitlines() if not line.startswith("#")]
    assert all("==" in line for line in lines if line.strip())


def test_setup_installs_every_python_package_against_the_constraints():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    installs = [line for line in setup.splitlines() if '"${pip[@]}" install' in line]
    assert len(installs) >= 4
    for line in installs:
        assert '"${pin[@]}"' in line or "-e ." in line, line
    assert "constraints.txt" in setup.split("requirements_hash=")[1].splitlines()[0]


def test_info_and_records_name_the_stack():
    info = subprocess.run(
        [sys.executable, "-m", "archbench.cli", "info", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert info.returncode == 0, info.stderr
    environment = json.loads(info.stdout)["environment"]
    assert environment["packages"]["horovod"] == "0.28.1"
    assert environment["constraints"] == stack()["constraints"]
    assert environment["constraints"]["pinned"] == len(pinned())

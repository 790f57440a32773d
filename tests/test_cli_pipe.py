"""A reader that stops early (`archbench ... | head`) ends the command quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

ARCHBENCH = str(Path(sys.executable).parent / "archbench")


def test_a_reader_gone_before_the_output_gets_no_traceback():
    process = subprocess.Popen(
        [ARCHBENCH, "cluster", "status", "--json"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()  # gone before the command has started, let alone printed
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 141, stderr
    assert stderr == ""

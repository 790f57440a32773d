"""What the study benchmarks share: run a study (resumable), then hand back its records folder."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from archbench.common.errors import UsageError
from archbench.sweep.spec import load_spec


def run_study(prog: str, default_study: str, argv: list[str] | None) -> Path | None:
    """Parse `--study`/`--no-run`, sweep the study unless told not to; its results folder, or
    None when the sweep could not run at all."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--study", default=default_study, type=Path)
    parser.add_argument("--no-run", action="store_true", help="only print the recorded runs")
    args = parser.parse_args(argv)
    if not args.no_run:
        sweep = [sys.executable, "-m", "archbench.cli", "sweep", str(args.study)]
        if subprocess.run(sweep, check=False).returncode not in (0, 1):
            return None
    try:  # where the sweep keeps the records: a folder named after the study, beside its spec
        return load_spec(args.study).results_dir
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None

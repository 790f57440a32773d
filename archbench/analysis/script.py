"""What every script under analysis/ does alike once its figure is drawn: write it where the
user asked, or beside the study, and turn bad input into one line and exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure

from archbench.common.errors import UsageError


def save_figure(fig: Figure, study: Path, script: str, out: Path | None) -> Path:
    """Write the figure to `out`, else to <study>/figures/<script's stem>.png (a records
    file's folder where `study` is a file); print and return the path."""
    folder = study if study.is_dir() else study.parent
    path = out or folder / "figures" / f"{Path(script).stem}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    print(path)
    return path


def run(main: Callable[[], None], script: str) -> None:
    """Run a script's main; bad input ends it with one line naming the script, exit 2."""
    try:
        main()
    except UsageError as error:  # nothing written: the figure is saved last
        print(f"{Path(script).name}: {error}", file=sys.stderr)
        sys.exit(error.exit_code)

"""Run records -> figures, tables and the written report (`archbench report`, `archbench compare`).

The modules live in the project's top-level `analysis/` folder and are imported as
`archbench.analysis.<module>`, so installing archbench adds no top-level `analysis` package to an
environment. A built wheel carries that folder as this package (setup.cfg's `package_dir`); in a
checkout, and in an editable install, this file points the package at the folder.
"""

from pathlib import Path

_FOLDER = Path(__file__).resolve().parents[2] / "analysis"
if _FOLDER.is_dir():
    __path__.append(str(_FOLDER))

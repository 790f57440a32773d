"""Every `from archbench... import name` in the package names something that exists.

Imports inside functions (kept there so a light command does not load TensorFlow) run only when
their branch does; a module that moved leaves them broken until a user reaches that branch.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "archbench"


def _from_imports():
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and node.module.split(".")[0] == PACKAGE
            ):
                yield path.relative_to(ROOT), node


def _resolves(module_name: str, name: str) -> bool:
    module = importlib.import_module(module_name)
    if hasattr(module, name):
        return True
    try:  # a submodule not yet imported by its package
        importlib.import_module(f"{module_name}.{name}")
    except ImportError:
        return False
    return True


def test_every_in_package_from_import_names_something_that_exists():
    broken = [
        f"{path}:{node.lineno}: from {node.module} import {alias.name}"
        for path, node in _from_imports()
        for alias in node.names
        if not _resolves(node.module, alias.name)
    ]
    assert list(_from_imports()), "no imports found: the scan looked in the wrong place"
    assert broken == []

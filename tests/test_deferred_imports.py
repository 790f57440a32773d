"""An import inside a function says why it is there.

Imports sit at the top of a module, so its top shows what it depends on. The exceptions are
deliberate: an import deferred into a function keeps a heavy library (TensorFlow, Horovod,
mpi4py, matplotlib, numpy or pandas through the module it names) or a slow subsystem off a light
command such as `archbench --help` or `archbench cluster status`, or sits inside a guard. Each one
carries a comment with the word "deferred" saying why: on its own line, or on the line(s) directly
above it in the same block (one comment serves a run of imports).

The check covers imports of archbench modules and of the heavy libraries; an in-function import
of another module is left alone.
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "archbench"
HEAVY = ("tensorflow", "horovod", "mpi4py", "matplotlib")
MARK = "deferred"

Import = ast.Import | ast.ImportFrom


def _watched(node: Import) -> bool:
    """An import of an archbench module (absolute or relative) or of a heavy library."""
    if isinstance(node, ast.ImportFrom):
        names = [node.module or ""] if node.level == 0 else ["archbench"]
    else:
        names = [alias.name for alias in node.names]
    return any(name.split(".")[0] in ("archbench", *HEAVY) for name in names)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _blocks(node: ast.AST, in_function: bool) -> Iterator[tuple[list[ast.stmt], bool]]:
    """Every statement list under `node`, with whether it lies inside a function."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        block = getattr(node, field, None)
        if not isinstance(block, list) or not block:
            continue
        if field == "body" and isinstance(node, ast.If) and _is_type_checking(node.test):
            continue  # never runs
        if isinstance(block[0], ast.stmt):
            yield block, in_function
        for child in block:
            function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            yield from _blocks(child, in_function or function)


def deferred_imports(source: str) -> Iterator[tuple[Import, list[Import]]]:
    """Each watched import inside a function, with the run of imports it closes (itself and the
    imports directly above it in its block)."""
    tree = ast.parse(source)
    for block, in_function in _blocks(tree, False):
        if not in_function:
            continue
        run: list[Import] = []
        for statement in block:
            if not isinstance(statement, Import):
                run = []
                continue
            run.append(statement)
            if _watched(statement):
                yield statement, list(run)


def _comments(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on it."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def unexplained(source: str) -> list[Import]:
    """The in-function imports of `source` with no "deferred" comment on their line or above."""
    comments = _comments(source)
    lines = source.splitlines()
    missing = []
    for node, run in deferred_imports(source):
        said = [comments.get(n, "") for i in run for n in range(i.lineno, i.end_lineno + 1)]
        above = run[0].lineno - 1  # comment lines directly above the run
        while above >= 1 and lines[above - 1].strip().startswith("#"):
            said.append(comments[above])
            above -= 1
        if not any(MARK in text.lower() for text in said):
            missing.append(node)
    return sorted(missing, key=lambda node: node.lineno)


def test_every_deferred_import_says_why():
    found = []
    checked = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        checked += sum(1 for _ in deferred_imports(source))
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
            for node in unexplained(source)
        ]
    assert checked > 0, "no in-function imports found: the scan looked in the wrong place"
    assert found == [], (
        f'in-function imports without a "{MARK}" comment saying why (move the import to the '
        "top of the file, or say why it waits):\n" + "\n".join(found)
    )


def test_a_comment_on_the_line_or_above_the_run_counts():
    source = (
        "import os\n"
        "def f():\n"
        "    from archbench import a  # deferred: loads TensorFlow\n"
        "def g():\n"
        "    # deferred: loads mpi4py\n"
        "    from mpi4py import MPI\n"
        "    from archbench import b\n"
        "def h():\n"
        "    import tensorflow as tf  # deferred: TensorFlow\n"
        "    from . import c\n"
    )
    assert unexplained(source) == []


def test_an_import_without_a_reason_is_found():
    source = (
        "from archbench import top\n"
        "def f():\n"
        "    # the model\n"
        "    from archbench.workloads.models import build_model\n"
        "def g():\n"
        "    # deferred: loads TensorFlow\n"
        "    x = 1\n"
        "    import tensorflow as tf\n"
        "def h():\n"
        "    import json\n"
        "    from ..sibling import thing\n"
        "def i():\n"
        "    import matplotlib.pyplot as plt\n"
        "    # deferred: after plt\n"
    )
    names = [ast.unparse(node) for node in unexplained(source)]
    assert names == [
        "from archbench.workloads.models import build_model",
        "import tensorflow as tf",
        "from ..sibling import thing",
        "import matplotlib.pyplot as plt",
    ]


def test_imports_under_type_checking_and_of_other_modules_are_not_checked():
    source = (
        "def f():\n"
        "    import json\n"
        "    from collections import Counter\n"
        "    if TYPE_CHECKING:\n"
        "        from archbench.workloads.models import Model\n"
    )
    assert list(deferred_imports(source)) == []


def test_the_light_commands_load_no_heavy_library():
    """`archbench --help` imports every subcommand's module; none of them loads TensorFlow,
    Horovod, mpi4py or matplotlib at import (that is what the deferred imports are for)."""
    code = (
        "import sys\n"
        "from archbench.cli import build_parser\n"
        "build_parser([])\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_the_train_command_starts_no_numpy_thread_before_it_blocks_the_stop_signals():
    """`archbench.train` blocks SIGTERM/SIGINT in its first lines, before argparse pulls numpy
    in: OpenBLAS starts its threads on import, and a thread with the signals unblocked takes a
    launcher's SIGTERM and dies of it silently, so the run never says it was stopped (nor writes
    its failed record). So importing the module must not import numpy."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, archbench.train; print('numpy' in sys.modules)"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "False"

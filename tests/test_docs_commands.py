"""Every command README.md and docs/ show is checked, so the documentation cannot rot.

Commands are the lines of the pages' `sh` blocks; every fenced block must name its language, so
none hides from this test. Each command is classified by what it starts:

- `make TARGET`: `make -n TARGET` (the target exists; nothing runs);
- `archbench sweep ... --dry-run`: run for real, on a copy of the specs;
- any other `archbench ...` (also after `salloc ARGS`): parsed by archbench's own parser, as the
  real command parses it, without running (a real run needs hosts, an allocation or minutes);
- `python -m archbench.train ...`, alone or after `mpirun`/`horovodrun` with their options:
  parsed and validated as the run validates its configuration before any work (the ranges, the
  combinations, the model against the data, `--out`), and the launcher is on PATH;
- `python benchmarks/X.py ...`: the script's `--help` runs and names every option used.

A command no rule knows fails the test, and so does a path into the checkout (`runs/*.yaml`,
`hostfiles/*`, `benchmarks/*.py`) that does not exist, unless the command or an earlier one of
the page writes it (`-o`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL = {"sh", "bash", "shell", "console"}
# What a placeholder stands for in a command shown with one.
PLACEHOLDERS = {"<study>": "demo"}
CHECKOUT_PATH = re.compile(r"\b(?:runs|hostfiles|benchmarks)/[\w./-]+\.(?:yaml|txt|py)\b")
LAUNCHERS = {"mpirun", "horovodrun"}


@dataclass(frozen=True)
class Command:
    page: str
    line: str
    written: tuple[str, ...]  # paths this and earlier commands of the page write (-o)

    def __str__(self) -> str:
        return f"{self.page}: {self.line}"


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return [(match.group(1), match.group(2)) for match in FENCE.finditer(text)]


def commands_of(page: Path) -> list[Command]:
    commands: list[Command] = []
    written: list[str] = []
    for language, block in fenced_blocks(page.read_text()):
        if language not in SHELL:
            continue
        for raw in block.splitlines():
            line = raw.split(" #", 1)[0].strip() if not raw.startswith("#") else ""
            if not line:
                continue
            for placeholder, value in PLACEHOLDERS.items():
                line = line.replace(placeholder, value)
            words = shlex.split(line)
            written += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--out")]
            commands.append(Command(page.relative_to(REPO).as_posix(), line, tuple(written)))
    return commands


# Tutorial pages: their commands run for real, in order, from a scratch folder whose examples/
# is the checkout's (test_the_commands_of_a_tutorial_page_run); the other pages' are checked.
EXECUTED = {"docs/your-model-and-data.md"}
ALL = [
    command
    for page in PAGES
    for command in commands_of(page)
    if page.relative_to(REPO).as_posix() not in EXECUTED
]


def test_every_fenced_block_names_its_language():
    untagged = [
        f"{page.relative_to(REPO)}: {block.splitlines()[0] if block else ''}"
        for page in PAGES
        for language, block in fenced_blocks(page.read_text())
        if not language
    ]
    assert not untagged, f"fenced blocks without a language (sh, yaml, text...): {untagged}"


def test_the_pages_show_commands():
    assert len(ALL) >= 20
    assert {c.page for c in ALL} >= {"README.md", "docs/training.md", "docs/doctor.md"}


# --------------------------------------------------------------------------- the checks


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def check_paths(command: Command, words: list[str]) -> None:
    for word in words:
        for path in CHECKOUT_PATH.findall(word):
            if path in command.written:
                continue
            assert (REPO / path).exists(), f"{command}: {path} is not in the checkout"


def check_archbench(command: Command, argv: list[str], workspace: Path) -> None:
    """Parsed by archbench's own parser; `sweep --dry-run` runs."""
    from archbench.cli import build_parser

    if argv[:1] == ["sweep"] and "--dry-run" in argv:
        if any(path in command.written for path in argv):
            return  # the spec an earlier command writes: checked by tests/test_init.py
        result = subprocess.run(
            [sys.executable, "-m", "archbench.cli", *argv],
            cwd=workspace, env=_env(), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}{result.stderr}"
        return
    try:
        args = build_parser(argv).parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{command}: archbench does not take these arguments (exit {exc.code})")
    assert callable(getattr(args, "func", None)), f"{command}: no command runs"


def check_train(command: Command, argv: list[str], workspace: Path) -> None:
    """Validated as the run validates its configuration before any work."""
    from archbench.common.errors import UsageError
    from archbench.runtime.config import config_from_args
    from archbench.train import build_parser

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{command}: train does not take these arguments (exit {exc.code})")
    here = os.getcwd()
    os.chdir(workspace)  # where --out is probed
    try:
        config_from_args(args)
    except UsageError as exc:
        pytest.fail(f"{command}: refused: {exc}")
    finally:
        os.chdir(here)


def launcher_program(command: Command, words: list[str]) -> list[str]:
    """The program a launcher line starts (after its own options)."""
    assert shutil.which(words[0], path=_env()["PATH"]), f"{command}: {words[0]} is not on PATH"
    for index, word in enumerate(words):
        if word == "python":
            return words[index:]
    pytest.fail(f"{command}: the launcher starts no python program")


def check_benchmark(command: Command, words: list[str]) -> None:
    script = REPO / words[1]
    assert script.is_file(), f"{command}: no such script"
    result = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, f"{command}: --help failed\n{result.stderr}"
    for option in (word.split("=", 1)[0] for word in words[2:] if word.startswith("--")):
        assert option in result.stdout, f"{command}: {words[1]} has no option {option}"


def check(command: Command, workspace: Path) -> None:
    words = shlex.split(command.line)
    check_paths(command, words)
    if words[0] == "salloc":  # salloc [its options] COMMAND: the command inside the allocation
        index = next(i for i, w in enumerate(words) if w == "archbench")
        words = words[index:]
    if words[0] in LAUNCHERS:
        words = launcher_program(command, words)
    if words[0] == "make":
        result = subprocess.run(
            ["make", "-n", *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, f"{command}: {result.stderr}"
    elif words[0] == "archbench":
        check_archbench(command, words[1:], workspace)
    elif words[:3] == ["python", "-m", "archbench.train"]:
        check_train(command, words[3:], workspace)
    elif words[0] == "python" and len(words) > 1 and words[1].startswith("benchmarks/"):
        check_benchmark(command, words)
    else:
        pytest.fail(f"{command}: no rule says how to check this command; add one")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A copy of the checkout's specs and hostfiles, where dry runs and probes write."""
    folder = tmp_path_factory.mktemp("docs-commands")
    for name in ("runs", "hostfiles"):
        (folder / name).mkdir()
        for path in (REPO / name).iterdir():
            if path.is_file():  # the specs and example hostfiles, not results
                shutil.copy2(path, folder / name / path.name)
    (folder / "examples").symlink_to(REPO / "examples")  # the model files the pages train
    return folder


@pytest.mark.parametrize("command", ALL, ids=[str(c) for c in ALL])
def test_the_command_works(command: Command, workspace: Path):
    check(command, workspace)


def test_an_unknown_command_or_flag_is_caught(workspace: Path):
    with pytest.raises(pytest.fail.Exception, match="no rule"):
        check(Command("x.md", "rm -rf runs/demo/", ()), workspace)
    with pytest.raises(pytest.fail.Exception, match="does not take"):
        check(Command("x.md", "archbench sweep runs/demo.yaml --dry-rnu", ()), workspace)
    with pytest.raises(pytest.fail.Exception, match="refused"):
        check(Command("x.md", "python -m archbench.train --arch ring --lr -1", ()), workspace)
    with pytest.raises(AssertionError, match="not in the checkout"):
        check(Command("x.md", "archbench sweep runs/gone.yaml", ()), workspace)


# archbench commands a tutorial page shows that take minutes or need a cluster: parsed only
PARSED_ONLY = {"report", "compare", "submit", "cluster", "microbench"}


@pytest.mark.parametrize("page", sorted(EXECUTED))
def test_the_commands_of_a_tutorial_page_run(page: str, tmp_path: Path):
    for name in ("examples", "hostfiles"):
        (tmp_path / name).symlink_to(REPO / name)
    (tmp_path / "runs").mkdir()
    commands = commands_of(REPO / page)
    assert commands, f"{page} shows no command"
    for command in commands:
        words = shlex.split(command.line)
        if words[0] == "archbench":
            sweeps = words[1] == "sweep" and "--dry-run" not in words
            if sweeps or words[1] in PARSED_ONLY:
                check_archbench(command, words[1:], tmp_path)
                continue
            words = [sys.executable, "-m", "archbench.cli", *words[1:]]
        elif words[0] == "python":
            words[0] = sys.executable
        else:
            assert words[0] in LAUNCHERS, f"{command}: no rule says how to run this command"
        result = subprocess.run(
            words, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}{result.stderr[-3000:]}"


# --------------------------------------------------------------------------- links

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors_of(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, blanks to '-'."""
    text = FENCE.sub("", page.read_text())
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_every_link_between_pages_reaches_a_file_and_heading():
    broken = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if re.match(r"[a-z]+:", target):  # https: and the like
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors_of(file):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)

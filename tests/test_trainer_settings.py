"""Each trainer receives exactly the settings it reads.

A trainer class declares `SETTINGS_READ` and is given a view of the run's TrainConfig holding
those names alone (`Trainer.settings_from`). The scan below reads archbench/trainers/*.py: every
`self.config.<name>` (or `config.<name>`, `getattr(config, "<name>")`) a trainer's methods read,
and every name read by a helper they hand the view to (`SyncSchedule.for_config`,
`PartitionSpec.from_config`, `make_optimizer`, followed into their source), must be declared by
the class; and every declared name must be read, so the declaration stays the list of what the
trainer uses.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from archbench.common.archs import ARCHS
from archbench.runtime.config import TrainConfig, TrainSettings, settings_view
from archbench.trainers.base import Trainer

TRAINERS = Path(__file__).resolve().parent.parent / "archbench" / "trainers"
HELPER_DEPTH = 3  # a helper that hands the view on is followed this far


def _is_view(node: ast.expr, names: set[str]) -> bool:
    """`self.config`, or a plain name bound to the view (`config`)."""
    if isinstance(node, ast.Attribute):
        return (
            node.attr == "config" and isinstance(node.value, ast.Name) and node.value.id == "self"
        )
    return isinstance(node, ast.Name) and node.id in names


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` -> ["a", "b", "c"]; None for anything else (a call's result, a subscript)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else [*head, node.attr]
    return None


def _resolve(parts: list[str], namespace: dict):
    value = namespace.get(parts[0], getattr(builtins, parts[0], None))
    for part in parts[1:]:
        value = getattr(value, part, None)
    return value


def _reads(function: ast.AST, names: set[str], namespace: dict, depth: int) -> Iterator[str]:
    """The settings `function` reads from the view it knows as `names` (and `self.config`)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and _is_view(node.value, names):
            yield node.attr
        if not isinstance(node, ast.Call):
            continue
        parts = _dotted(node.func)
        if parts == ["getattr"] and node.args and _is_view(node.args[0], names):
            assert isinstance(node.args[1], ast.Constant), ast.unparse(node)
            yield node.args[1].value
            continue
        passed = [(index, None) for index, arg in enumerate(node.args) if _is_view(arg, names)] + [
            (None, kw.arg) for kw in node.keywords if _is_view(kw.value, names)
        ]
        if not passed or parts in (["isinstance"], ["getattr"]):
            continue
        if parts is None:
            # super().__init__(config, ...): the base class's own methods are scanned as its own
            assert ast.unparse(node.func).startswith("super()"), ast.unparse(node)
            continue
        helper = _resolve(parts, namespace)
        assert helper is not None, f"cannot follow the view into {ast.unparse(node.func)}"
        assert depth > 0, f"the view goes too deep: {ast.unparse(node.func)}"
        yield from _helper_reads(helper, passed, depth - 1)


def _helper_reads(helper, passed: list[tuple[int | None, str | None]], depth: int) -> set[str]:
    """What a function or method reads from the view passed to it (at those positions)."""
    source = textwrap.dedent(inspect.getsource(helper))
    tree = ast.parse(source).body[0]
    assert isinstance(tree, ast.FunctionDef), helper
    params = [a.arg for a in tree.args.posonlyargs + tree.args.args]
    if inspect.ismethod(helper):
        params = params[1:]  # bound: cls or self is already given
    names = {params[index] if index is not None else keyword for index, keyword in passed}
    namespace = vars(inspect.getmodule(helper))
    return set(_reads(tree, names, namespace, depth))


def _trainer_classes() -> Iterator[tuple[type[Trainer], ast.ClassDef]]:
    for path in sorted(TRAINERS.glob("*.py")):
        module = importlib.import_module(f"archbench.trainers.{path.stem}")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                if isinstance(cls, type) and issubclass(cls, Trainer):
                    yield cls, node


def _own_reads(cls: type[Trainer], node: ast.ClassDef) -> set[str]:
    """The settings the methods written in this class read (itself or through helpers)."""
    namespace = vars(importlib.import_module(cls.__module__))
    found: set[str] = set()
    for method in node.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        args = method.args.posonlyargs + method.args.args
        if not args or args[0].arg != "self":
            continue  # a classmethod (settings_from) is given the whole TrainConfig
        # a method's `config` is the view: its parameter (__init__) or `config = self.config`
        found |= set(_reads(method, {"config"}, namespace, HELPER_DEPTH))
    return found


SCANNED = {cls: _own_reads(cls, node) for cls, node in _trainer_classes()}


def _reads_of(cls: type[Trainer]) -> set[str]:
    """What runs in this trainer reads: its own methods' reads and its bases'."""
    return set().union(*(SCANNED[base] for base in cls.__mro__ if base in SCANNED))


def test_every_architectures_trainer_is_scanned():
    for descriptor in ARCHS.values():
        assert descriptor.trainer_class() in SCANNED, descriptor.name
    assert {"arch", "sync_every", "lr", "compression_spec"} <= set().union(*SCANNED.values())


@pytest.mark.parametrize("cls", list(SCANNED), ids=lambda cls: cls.__name__)
def test_a_trainer_declares_every_setting_it_reads(cls):
    undeclared = _reads_of(cls) - set(cls.SETTINGS_READ)
    assert not undeclared, f"{cls.__name__} reads {sorted(undeclared)}: add to SETTINGS_READ"


@pytest.mark.parametrize("cls", list(SCANNED), ids=lambda cls: cls.__name__)
def test_a_trainer_declares_only_settings_it_reads(cls):
    unread = set(cls.SETTINGS_READ) - _reads_of(cls)
    assert not unread, f"{cls.__name__} declares {sorted(unread)} but never reads them"
    for base in cls.__mro__[1:]:
        if base in SCANNED:
            assert set(base.SETTINGS_READ) <= set(cls.SETTINGS_READ), (cls, base)


@pytest.mark.parametrize("cls", list(SCANNED), ids=lambda cls: cls.__name__)
def test_a_trainer_receives_exactly_what_it_declares(cls):
    config = TrainConfig(arch="ps", lr=0.25, num_ps=2)
    view = cls.settings_from(config)
    assert isinstance(view, TrainSettings)
    assert {name: getattr(view, name) for name in cls.SETTINGS_READ} == {
        name: getattr(config, name) for name in cls.SETTINGS_READ
    }
    with pytest.raises(AttributeError, match="out"):
        _ = view.out  # a setting no trainer reads


def test_the_view_holds_only_its_names_and_is_frozen():
    config = TrainConfig(arch="ring", lr=0.5, seed=7)
    view = settings_view(config, ("arch", "lr", "compression_spec"))
    assert (view.arch, view.lr, view.compression_spec) == ("ring", 0.5, config.compression_spec)
    with pytest.raises(AttributeError, match="'seed'"):
        _ = view.seed
    assert getattr(view, "seed", None) is None  # so a helper's getattr default would hide it
    with pytest.raises(AttributeError):
        view.lr = 1.0
    with pytest.raises(ValueError, match="not_a_setting"):
        settings_view(config, ("arch", "not_a_setting"))


def test_a_trainer_refuses_the_whole_config():
    cls = ARCHS["single"].trainer_class()
    with pytest.raises(TypeError, match="settings_from"):
        cls(TrainConfig(arch="single"), None, None)

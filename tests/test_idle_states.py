"""Idle cores poll, not halt, while a dilated cluster is up (archbench.cluster.idlestates): on a
copy of the haltpoll driver's parameters, what `hold` saves and sets and `release` puts back."""

from __future__ import annotations

import json
from pathlib import Path

from archbench.cluster import idlestates

AS_BOOTED = {
    "guest_halt_poll_ns": "0",
    "guest_halt_poll_grow_start": "50000",
    "guest_halt_poll_allow_shrink": "Y",
    "guest_halt_poll_grow": "2",  # not one hold touches
}


def _parameters(root: Path) -> Path:
    root.mkdir(parents=True)
    for name, value in AS_BOOTED.items():
        (root / name).write_text(value + "\n")
    return root


def _driver(root: Path, name: str = "haltpoll") -> Path:
    """A copy of cpuidle's current_driver naming `name`."""
    path = root / "current_driver"
    path.write_text(name + "\n")
    return path


def _values(root: Path) -> dict[str, str]:
    return {path.name: path.read_text().strip() for path in sorted(root.iterdir())}


def test_hold_lets_idle_cores_poll_and_release_puts_back_what_was(tmp_path: Path) -> None:
    parameters, saved = _parameters(tmp_path / "parameters"), tmp_path / "run" / "idle.json"
    driver = _driver(tmp_path)
    assert idlestates.poll_us(parameters, driver) == 0
    assert idlestates.hold(parameters, saved, driver) == idlestates.POLL_NS
    held = _values(parameters)
    assert held["guest_halt_poll_ns"] == held["guest_halt_poll_grow_start"] == "50000000"
    assert held["guest_halt_poll_allow_shrink"] == "N" and held["guest_halt_poll_grow"] == "2"
    assert idlestates.poll_us(parameters, driver) == 50_000
    # a second cluster's hold keeps the first one's record of how the machine was
    assert idlestates.hold(parameters, saved, driver) == idlestates.POLL_NS
    assert json.loads(saved.read_text())["guest_halt_poll_ns"] == "0"
    idlestates.release(saved)
    assert _values(parameters) == AS_BOOTED and not saved.exists()
    idlestates.release(saved)  # safe to repeat
    assert _values(parameters) == AS_BOOTED


def test_a_machine_without_haltpoll_is_left_as_it_is(tmp_path: Path) -> None:
    parameters, saved = tmp_path / "none", tmp_path / "idle.json"
    driver = _driver(tmp_path)
    assert idlestates.hold(parameters, saved, driver) is None and not saved.exists()
    assert idlestates.poll_us(parameters, driver) is None


def test_parameters_no_idle_core_reads_are_left_as_they_are(tmp_path: Path) -> None:
    """haltpoll's parameters exist, but the idle cores run another driver (or none): nothing is
    set, and the machine is not said to poll."""
    parameters, saved = _parameters(tmp_path / "parameters"), tmp_path / "idle.json"
    for name in ("none", "acpi_idle"):
        driver = _driver(tmp_path, name)
        assert idlestates.hold(parameters, saved, driver) is None and not saved.exists()
        assert idlestates.poll_us(parameters, driver) is None
        assert _values(parameters) == AS_BOOTED
    missing = tmp_path / "no-cpuidle" / "current_driver"
    assert idlestates.hold(parameters, saved, missing) is None
    assert idlestates.poll_us(parameters, missing) is None


def test_parameters_that_cannot_be_set_are_left_as_they_were(tmp_path: Path, monkeypatch) -> None:
    parameters, saved = _parameters(tmp_path / "parameters"), tmp_path / "idle.json"
    driver = _driver(tmp_path)
    (parameters / "guest_halt_poll_allow_shrink").chmod(0o444)
    original_write = Path.write_text

    def refused(path: Path, text: str, *args, **kwargs) -> int:  # root ignores file modes
        if path.name == "guest_halt_poll_allow_shrink":
            raise PermissionError(13, "Read-only file system", str(path))
        return original_write(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", refused)
    assert idlestates.hold(parameters, saved, driver) is None
    monkeypatch.undo()
    # the limit written before the refusal is back as it was; nothing is left saved
    assert _values(parameters) == AS_BOOTED and not saved.exists()

"""The run path's door to the emulated cluster (archbench.runtime.emulation): off an emulated node a rank
learns D = 1, runs without caps and meters its CPU without loading anything of
archbench.cluster; on one it reads D and the node's cores from the environment its node set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from archbench.runtime import emulation

RUN_PATH = (
    "archbench.train", "archbench.runtime.loop", "archbench.runtime.launch", "archbench.runtime.warmgroup",
    "archbench.trainers.single", "archbench.trainers.p2p", "archbench.trainers.ps",
    "archbench.timeline.tracer", "archbench.timeline.build", "archbench.runtime.environment",
    "archbench.record", "archbench.perfmodel.measure.mb_ranks",
)  # fmt: skip


def test_a_rank_off_an_emulated_node_loads_nothing_of_the_emulator() -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ARCHBENCH_") and key != "LD_PRELOAD"
    }
    code = (
        "import sys, importlib\n"
        f"for name in {RUN_PATH!r}: importlib.import_module(name)\n"
        "from archbench.runtime import emulation as e\n"
        "meter = e.own_cpu_meter()\n"
        "sum(range(10**6))\n"
        "from archbench.runtime.launch import host_cpus\n"
        "assert host_cpus() > 0  # a container's budget is read without the emulator\n"
        "print(e.factor(), e.virtual(2.0), e.arm_caps(), e.disarm_caps(), meter() > 0)\n"
        "print(sorted(m for m in sys.modules if m.startswith('archbench.cluster')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answers, loaded = result.stdout.strip().splitlines()[-2:]
    assert answers == "1.0 2.0 None None True"
    assert loaded == "[]", loaded


def test_on_a_node_the_door_reads_what_the_node_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(emulation.DILATION_VARIABLE, "4")
    monkeypatch.setenv(emulation.VCPUS_VARIABLE, "3")
    monkeypatch.setenv(emulation.PROCESS_VCPUS_VARIABLE, "1")
    monkeypatch.setenv(emulation.PERIOD_VARIABLE, "12500")
    assert emulation.factor() == 4.0 and emulation.virtual(2.0) == 0.5
    assert emulation.node_vcpus() == 3 and emulation.process_vcpus() == 1
    assert emulation.cap_period_s() == pytest.approx(0.0125)
    # a value a node could not have set is real time, never a speed-up
    for text in ("0.5", "nan", "x", ""):
        monkeypatch.setenv(emulation.DILATION_VARIABLE, text)
        assert emulation.factor() == 1.0
    monkeypatch.setenv("LD_PRELOAD", f"/some/dir/{emulation.LIBRARY_NAME}")
    assert emulation.on_emulated_node()
    monkeypatch.setenv("LD_PRELOAD", "/some/dir/libother.so")
    assert not emulation.on_emulated_node()

"""What a stop costs a capped thread (archbench.cluster.capcost): measured in a child process
alternating between the root group and a temporary capped one, which is gone afterwards."""

from __future__ import annotations

import math

import pytest

from archbench.cluster import capcost
from archbench.runtime import cgroupread

pytestmark = pytest.mark.skipif(
    cgroupread.detect() is None, reason="needs a cgroup cpu controller (root)"
)


def _temporary_groups() -> list[str]:
    hierarchy = cgroupread.detect()
    return sorted(path.name for path in hierarchy.cpu_root.glob("archbench-capcost-*"))


def test_the_ratio_is_measured_and_its_group_removed() -> None:
    before = _temporary_groups()
    ratio = capcost.measure(4.0, 20_000)
    assert ratio is not None and math.isfinite(ratio)
    # the same work's CPU, capped over uncapped: caches refilled after stops can only add to
    # it, and timing noise on a shared machine cannot halve it
    assert 0.5 < ratio < 20
    assert _temporary_groups() == before


def test_no_dilation_no_measurement() -> None:
    assert capcost.measure(1.0, 20_000) is None

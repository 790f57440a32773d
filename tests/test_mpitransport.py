"""archbench's default for Open MPI's TCP transport, and a launch's own choice kept."""

from __future__ import annotations

import os

import pytest

from archbench.runtime import mpitransport


@pytest.fixture
def fresh(monkeypatch):
    """A process that has not applied the default yet; afterwards the variable apply() set is
    gone again (the runs other tests launch would inherit it as the launch's)."""
    before = os.environ.get(mpitransport.TCP_FLAGS_ENV)
    monkeypatch.setattr(mpitransport, "_set_by", None)
    monkeypatch.delenv(mpitransport.TCP_FLAGS_ENV, raising=False)
    yield monkeypatch
    os.environ.pop(mpitransport.TCP_FLAGS_ENV, None)
    if before is not None:
        os.environ[mpitransport.TCP_FLAGS_ENV] = before


def test_without_a_launch_setting_the_flags_are_open_mpis_default_less_put(fresh):
    ranks_will_apply = mpitransport.settings()  # a driver's record: what its ranks apply
    mpitransport.apply()
    assert mpitransport.settings() == ranks_will_apply
    flags = mpitransport.settings()["btl_tcp_flags"].split(",")
    assert "put" not in flags and "send" in flags
    assert mpitransport.settings()["set_by"] == "archbench"


def test_a_launch_setting_is_kept_and_named_as_the_launchs(fresh):
    fresh.setenv(mpitransport.TCP_FLAGS_ENV, "send,put")
    mpitransport.apply()
    mpitransport.apply()  # a second call (a warm group's next run) changes nothing
    assert mpitransport.settings() == {"btl_tcp_flags": "send,put", "set_by": "launch"}

"""Which rows of a study's table belong to which kind of architecture: masks over the `arch`
column, answered by the descriptors (`archbench.common.archs`) rather than by architecture names."""

from __future__ import annotations

import pandas as pd

from archbench.common.archs import BASELINES, WITH_HOROVOD, WITH_SERVERS


def baseline(frame: pd.DataFrame) -> pd.Series:
    """Rows of the one-process baseline."""
    return frame["arch"].isin(BASELINES)


def distributed(frame: pd.DataFrame) -> pd.Series:
    """Rows of every other architecture (and of rows with no architecture)."""
    return ~baseline(frame)


def with_servers(frame: pd.DataFrame) -> pd.Series:
    """Rows of an architecture with parameter servers."""
    return frame["arch"].isin(WITH_SERVERS)


def with_horovod(frame: pd.DataFrame) -> pd.Series:
    """Rows of an architecture whose exchange Horovod carries."""
    return frame["arch"].isin(WITH_HOROVOD)

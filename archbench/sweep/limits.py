"""How large a study may be, checked when its spec is read and before its plan is built.

Every size a spec gives has a limit, so a slip (`repetitions: 1000000000`, a full factorial of ten
factors with ten levels each) is refused with one line instead of filling the memory. The limits
are far above what one machine or one allocation measures in a week: ten thousand runs of a few
seconds each are most of a day. The number of workers per run is the settings registry's (its
`workers` row); the nodes of an emulated cluster are `archbench.cluster.spec.MAX_NODES`; the
ranks one host may run (`cluster.slots`, a hostfile's `slots=`) are `archbench.common.hosts.MAX_SLOTS`.
"""

from __future__ import annotations

from archbench.common.hosts import MAX_SLOTS  # noqa: F401 (ranks one host may run: cluster.slots)

MAX_SPEC_BYTES = 1 << 20  # the spec file itself
MAX_REPETITIONS = 1_000
MAX_LEVELS = 1_000  # levels of one factor
MAX_DESIGN_POINTS = 10_000  # combinations a design produces, before dropping and collapsing
MAX_RUNS = 10_000  # configurations x repetitions
MAX_RULES = 1_000  # exclude patterns, timeout rules
MAX_LAUNCH_RETRIES = 10

"""The run record's single owner: schema and migrations (`schema`), every key declared (`keys`),
builder (`build`), reader and writer (`io`), typed accessors (`view`) and what it says about the
machine (`env`). See README, 'Run record', and docs/record.md."""

from archbench.record.build import build_record, cluster_section, in_virtual_time
from archbench.record.env import (
    cpu_model,
    environment,
    git_commit,
    load_average,
    mpi_version,
    new_run_id,
    now_iso,
    run_environment,
)
from archbench.record.io import (
    RESULTS_NAME,
    append_record,
    latest_per_run,
    read_lines,
    read_records,
    study_files,
)
from archbench.record.schema import (
    MIGRATIONS,
    PLACEMENTS,
    REQUIRED_KEYS,
    SCHEMA,
    VERSION,
    NewerSchema,
    complete,
    migrate,
    missing_keys,
    placement_of,
)
from archbench.record.view import RunRecord

__all__ = [
    "MIGRATIONS",
    "PLACEMENTS",
    "REQUIRED_KEYS",
    "RESULTS_NAME",
    "SCHEMA",
    "VERSION",
    "NewerSchema",
    "RunRecord",
    "append_record",
    "build_record",
    "cluster_section",
    "complete",
    "cpu_model",
    "environment",
    "git_commit",
    "in_virtual_time",
    "latest_per_run",
    "load_average",
    "migrate",
    "missing_keys",
    "mpi_version",
    "new_run_id",
    "now_iso",
    "placement_of",
    "read_lines",
    "read_records",
    "run_environment",
    "study_files",
]

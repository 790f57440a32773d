"""The run record's single owner: schema and migrations (`schema`), every key declared (`keys`),
builder (`build`), reader and writer (`io`) and typed accessors (`view`). It imports nothing above
it: what a run says about its machine is gathered by `archbench.runtime.environment` and passed in. See
docs/record.md."""

from archbench.record.build import build_record, cluster_section, in_virtual_time
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
    "in_virtual_time",
    "latest_per_run",
    "migrate",
    "missing_keys",
    "placement_of",
    "read_lines",
    "read_records",
    "study_files",
]

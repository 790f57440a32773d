"""Every key of the run record is declared once (archbench.record.keys) and documented in
docs/record.md; records of older versions migrate, in order, to this one; a newer one is
refused with one line. No processes: the record is built from the code that writes each part."""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path

import pytest
from record_files import built_record

from archbench.analysis.load import EXPECTED_FIELDS, FIELD_COLUMNS, MEASURED_FIELDS
from archbench.record import (
    MIGRATIONS,
    REQUIRED_KEYS,
    SCHEMA,
    VERSION,
    NewerSchema,
    cluster_section,
    in_virtual_time,
    migrate,
    read_lines,
)
from archbench.record.keys import BY_PATH, KEYS, UNITS, declared, undeclared
from archbench.runtime import environment as record_env
from archbench.runtime.config import TrainConfig
from archbench.runtime.localsgd import SyncSchedule, comm_record
from archbench.runtime.loop import LoopResult, step_statistics
from archbench.runtime.phases import PHASES, PhaseClock
from archbench.runtime.warmgroup import cold_launch_record
from archbench.trainers.base import Trainer

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
DOC = ROOT / "docs" / "record.md"


def _loop() -> LoopResult:
    return LoopResult(
        steps=20,
        train_s=0.5,
        warmup_s=0.2,
        step_times=[0.01, 0.012, 0.011, 0.013],
        compute_times=[0.008, 0.009],
        compute_passes=[4, 5],
        compute_window_s=0.05,
        dispatch_s=0.0004,
        exchange_times=[0.002, 0.003],
        evaluations=[
            {
                "epoch": 0,
                "step": 20,
                "train_s": 0.5,
                "samples_per_s": 2000.0,
                "loss": 0.9,
                "test_loss": 0.8,
                "test_accuracy": 0.7,
            }
        ],  # fmt: skip
        final_loss=0.8,
        last_loss=0.9,
        test_accuracy=0.7,
        time_to_target_s=0.4,
        param_norm=12.0,
        first_step_at=time.time(),
        eval_s=0.1,
    )


def fresh_record(monkeypatch, dilation: float = 2.0) -> dict:
    """A ps run's record as training assembles it (archbench.train's sections, each built by its
    writer), on a dilated emulated cluster."""
    from archbench import train

    monkeypatch.setattr(record_env, "mpi_version", lambda: "mpirun (Open MPI) 4.1.4")
    monkeypatch.setattr(record_env, "git_commit", lambda: "abc123")
    started = time.time() - 3
    loop = _loop()
    steps = step_statistics(loop, global_batch=64, warmup_steps=5)
    timing = train.timing_section(loop, steps, 60000, [None, 0.008, 0.009], [None, 4e-4, 5e-4],
                                  [None, 0.98, 0.97], started)  # fmt: skip
    config = TrainConfig(arch="ps", model="mlp", dataset="fashion_mnist", batch_size=32,
                         steps=20, num_ps=1).as_record(3, 2)  # fmt: skip
    config.update(controller="grpc", steps_run=20, dataset_source="/data/fashion-mnist")
    cluster = cluster_section("ps", 3, 1, ["n1", "n2", "n3"], "mpirun", "hostfile.txt", "1gbit",
                              launcher_command="mpirun -np 3 ...", slurm_job_id=None,
                              dilation=dilation, vcpus_per_node=2)  # fmt: skip
    env = record_env.run_environment(record_env.environment(), 0.5, 0.7, gpus=[])
    comm = {**Trainer.comm_stats(None, 20)}  # type: ignore[arg-type]
    comm.update(comm_record(SyncSchedule(4, 2), {"sync": 2, "local": 12, "average": 6}, 8000))
    clock = PhaseClock(started)
    for phase in ("imports", "data", "model", "hosts"):
        clock.end(phase)
    clock.end_loop(loop)
    clock.end("finish")
    result = train.result_section(loop, ["d1", "d1"], 0.6)
    node = {name.split(".")[-1]: 1.0 for name in BY_PATH if name.startswith("fidelity.nodes.*.")}
    fidelity = {
        **{key.path.split(".", 1)[1]: None for key in KEYS
           if key.path.count(".") == 1 and key.path.startswith("fidelity.")},
        "emulated": True,
        "nodes": {"n1": dict(node), "n2": dict(node)},
        "real": {"timing": timing, "time_to_target_s": 0.4},
    }  # fmt: skip
    return built_record(
        "fresh",
        config,
        study="keys",
        started_at=record_env.now_iso(),
        finished_at=record_env.now_iso(),
        cluster=cluster,
        env=env,
        model_stats={"params": 10, "param_bytes": 40, "tensors": 2},
        timing=in_virtual_time(timing, dilation),
        comm=in_virtual_time(comm, dilation),
        result=in_virtual_time(result, dilation),
        fidelity=fidelity,
        launch={**cold_launch_record(started, loop.first_step_at), "phases_s": clock.seconds},
    )


def test_every_key_of_a_freshly_built_record_is_declared(monkeypatch):
    record = fresh_record(monkeypatch)
    assert undeclared(record) == []
    assert record["schema"] == SCHEMA and migrate(copy.deepcopy(record)) == record
    failed = built_record("f", {}, study=None, status="failed", error={"type": "X", "message": "m"})
    assert undeclared(failed) == []
    # what `launch.phases_s` holds is the phases archbench.runtime.phases names
    assert set(record["launch"]["phases_s"]) == set(PHASES)


def test_checked_in_records_of_older_versions_are_declared_once_migrated():
    for record in read_lines(DATA / "records-schema1.jsonl").records:
        assert undeclared(record) == [], record["run_id"]


def test_the_contract_and_the_readers_fields_are_declared():
    contract = [f"{s}.{k}" if s else k for s, keys in REQUIRED_KEYS.items() for k in keys]
    used = [*contract, *FIELD_COLUMNS.values(), *MEASURED_FIELDS, *EXPECTED_FIELDS]
    assert [path for path in used if declared(path) is None] == []
    assert (
        declared("fidelity.nodes.n1.core_wait_share") is BY_PATH["fidelity.nodes.*.core_wait_share"]
    )
    assert declared("fidelity.nodes.n1.no_such_figure") is None
    assert declared("timing.no_such_key") is None
    assert declared("comm.ps.sharding.shards") is BY_PATH["comm.ps.sharding"]  # open: its writer's


def test_each_key_has_a_type_a_known_unit_and_a_version():
    from archbench.runtime.settings import SETTINGS

    setting_units = {row.unit for row in SETTINGS.values()}
    extra = {"", "samples", "processes", "steps", "bit/s", "us"}
    for key in KEYS:
        assert key.type in ("str", "int", "float", "bool", "list", "object", "mapping", "any"), key
        assert key.unit in UNITS or key.unit in setting_units | extra, key
        assert 1 <= key.since <= VERSION, key
    # durations in the record's timing are training time: virtual on a dilated cluster
    assert BY_PATH["timing.step_s_median"].unit == "s"
    assert BY_PATH["launch.phases_s.train"].unit == "real s"


def test_every_declared_key_is_in_the_documentation():
    text = DOC.read_text()
    listed = set(re.findall(r"`([a-z_*.0-9]+)`", text))
    assert sorted(key.path for key in KEYS if key.path not in listed) == []


def _version_1() -> dict:
    return json.loads((DATA / "records-schema1.jsonl").read_text().splitlines()[-1])


def test_a_schema_1_record_migrates_to_3_in_order():
    old = _version_1()
    assert old["run_id"] == "old-ring-1" and old["schema"] == "archbench.run/1"
    record = migrate(copy.deepcopy(old))
    assert record["schema"] == SCHEMA == "archbench.run/3" and sorted(MIGRATIONS) == [2, 3]
    assert record["migrated_from"] == "archbench.run/1"
    assert record["cluster"]["placement"] is None  # every rank on one host, no servers
    timing = record["timing"]
    assert timing["samples_per_epoch"] == 60000
    assert timing["epoch_s"] == pytest.approx(60000 / old["timing"]["samples_per_s"])
    assert timing["step_s_amortized"] == old["timing"]["step_s_median"]
    assert record["config"]["sync_every"] == 1 and record["config"]["sync_every_warmup_steps"] == 0
    assert record["derived"]["timing.step_s_amortized"] == "timing.step_s_median"
    # one step at a time gives the same record
    stepwise = copy.deepcopy(old)
    for target in sorted(MIGRATIONS):
        MIGRATIONS[target](stepwise)
    assert {k: v for k, v in record.items() if k not in ("schema", "migrated_from")} == {
        k: v for k, v in stepwise.items() if k != "schema"
    }


def test_a_schema_2_record_migrates_to_3_with_the_values_readers_derived_themselves():
    record = _version_1()
    migrate(record)
    record = {k: v for k, v in record.items() if k not in ("migrated_from", "derived")}
    record["schema"] = "archbench.run/2"
    record["config"]["arch"] = "p2p"
    record["config"]["compression"] = None
    for key in ("epoch_s", "samples_per_epoch", "step_s_amortized", "exposed_comm_s"):
        record["timing"].pop(key, None)
    record["timing"].update(step_s_median=0.02, comm_s_median=0.005, samples_per_s=3200.0)
    record["timing"]["epochs"] = [
        {"step": 10, "train_s": 0.2, "test_accuracy": 0.5},
        {"step": 20, "train_s": 0.4, "test_accuracy": 0.8},
    ]
    record["result"].pop("time_to_target_s")
    record["result"]["target_accuracy"] = 0.75
    del record["config"]["sync_every"], record["config"]["sync_every_warmup_steps"]
    migrate(record)
    assert record["schema"] == SCHEMA and record["migrated_from"] == "archbench.run/2"
    assert record["timing"]["exposed_comm_s"] == 0.005  # the whole exchange stands in
    assert record["timing"]["step_s_amortized"] == 0.02
    assert record["timing"]["epoch_s"] == pytest.approx(60000 / 3200)
    assert record["result"]["time_to_target_s"] == 0.4
    assert record["config"]["compression"] == "none" and record["config"]["sync_every"] == 1
    assert record["derived"]["timing.exposed_comm_s"] == "timing.comm_s_median"
    # a measured exposed time and a target never reached stay what they are
    kept = {"schema": "archbench.run/2", "timing": {"exposed_comm_s": 0.001, "comm_s_median": 0.005},
            "result": {"target_accuracy": 0.99}}  # fmt: skip
    migrate(kept)
    assert kept["timing"]["exposed_comm_s"] == 0.001 and kept["result"]["time_to_target_s"] is None


def test_a_record_of_a_newer_schema_is_one_clear_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"schema": f"archbench.run/{VERSION + 1}", "run_id": "x"}) + "\n")
    with pytest.raises(NewerSchema) as raised:
        read_lines(path)
    message = str(raised.value)
    assert "\n" not in message and "results.jsonl:1" in message
    assert f"archbench.run/{VERSION + 1}" in message and SCHEMA in message


def test_the_documented_key_tables_are_what_the_declarations_generate():
    """docs/record.md's 'Every key' tables are generated (`python -m archbench.record.keys`):
    a declaration changed without regenerating them fails here."""
    from archbench.record.keys import markdown

    text = DOC.read_text()
    marker = "This list is generated: `python -m archbench.record.keys`."
    assert marker in text
    assert text.split(marker, 1)[1].strip() == markdown().strip(), (
        "docs/record.md is stale: rewrite what follows its 'This list is generated' line with "
        "the output of python -m archbench.record.keys"
    )

"""The speed-vs-accuracy section (archbench/analysis/tradeoff.py) on a small study of known numbers.

The records are copies of one real p2p record (tests/data) with the fields the section reads
set per configuration: a reference (no reduction), top-k and --sync-every 4, two repetitions
each, so every mean, ratio and interval the section prints can be checked by hand.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from record_files import write_records
from scipy import stats as scipy_stats

from archbench.analysis import tradeoff
from archbench.analysis.load import load_study
from archbench.analysis.report import write_report

TEMPLATE = json.loads(
    (Path(__file__).parent / "data" / "records-schema1.jsonl").read_text().splitlines()[0]
)
# config name -> (settings, bytes per step, epoch seconds per repetition, step median,
# amortized step, accuracy per repetition)
CONFIGS = {
    "dense": ({"compression": "none", "sync_every": 1}, 400_000, (10.0, 12.0), 0.05, 0.05, (0.84, 0.86)),
    "topk": ({"compression": "topk", "sync_every": 1}, 8_000, (5.0, 6.0), 0.03, 0.03, (0.80, 0.82)),
    "h4": ({"compression": "none", "sync_every": 4}, 100_000, (4.0, 4.0), 0.01, 0.02, (0.83, 0.85)),
    "pieces": (
        {"compression": "none", "sync_every": 1, "partition_mb": 0.05, "priority": "on"},
        400_000, (11.0, 11.0), 0.05, 0.05, (0.84, 0.86),
    ),
}  # fmt: skip


def _record(name: str, repetition: int) -> dict:
    settings, sent, epochs, median, amortized, accuracy = CONFIGS[name]
    record = copy.deepcopy(TEMPLATE)
    record["run_id"] = f"{name}-r{repetition}"
    record.pop("sweep")
    record["factors"] = {"arch": "p2p", **settings}
    record["config"].update({"priority": "off", "partition_mb": None, **settings})
    if "partition_mb" in settings:  # what p2p measures of its pieces
        record["comm"]["tensor_partition"] = {
            "pipelined_median_s": 0.002,
            "first_layer_lead_median_s": 0.001 * (repetition + 1),
        }
    record["comm"]["bytes_sent_per_step"] = sent
    record["timing"].update(
        epoch_s=epochs[repetition], step_s_median=median, step_s_amortized=amortized
    )
    record["result"]["test_accuracy"] = accuracy[repetition]
    return record


@pytest.fixture
def study_file(tmp_path) -> Path:
    records = [_record(name, rep) for name in CONFIGS for rep in (0, 1)]
    return write_records(tmp_path / "comm" / "results.jsonl", records)


def _row(table, reduction: str):
    rows = table[table["reduction"] == reduction]
    assert len(rows) == 1, table[["config", "reduction"]]
    return rows.iloc[0]


def test_each_reduction_is_compared_with_the_uncompressed_synchronous_run(study_file):
    table = tradeoff.tradeoff_table(load_study(study_file))
    assert table["reduction"].iloc[0] == "none"  # the reference first
    assert sorted(table["reduction"]) == ["H=4", "none", "pieces ≤ 0.05 MB, priority", "topk"]
    reference, topk, local = (_row(table, r) for r in ("none", "topk", "H=4"))
    assert reference["reference"] and not topk["reference"]
    assert topk["bytes_fewer"] == pytest.approx(50.0)
    assert local["bytes_fewer"] == pytest.approx(4.0)
    assert topk["speedup"] == pytest.approx(11.0 / 5.5)
    assert local["speedup"] == pytest.approx(11.0 / 4.0)
    assert topk["accuracy_delta"] == pytest.approx(-0.04)
    # the 95% t interval of two repetitions: t(0.975, 1) * std / sqrt(2)
    half = scipy_stats.t.ppf(0.975, 1) * math.sqrt(2.0) / math.sqrt(2)
    assert reference["epoch_s_ci"] == pytest.approx(half)
    assert math.isnan(local["epoch_s_ci"]) or local["epoch_s_ci"] == 0
    # H > 1: the amortized step, not the (local) median step
    assert local["step_s"] == pytest.approx(0.02)
    assert topk["step_s"] == pytest.approx(0.03)
    # partitioning: the same bytes and speed here, and p2p's measured overlap carried over
    pieces = _row(table, "pieces ≤ 0.05 MB, priority")
    assert pieces["bytes_fewer"] == pytest.approx(1.0) and pieces["speedup"] == pytest.approx(1.0)
    assert pieces["pipelined_s"] == pytest.approx(0.002)
    assert pieces["first_layer_lead_s"] == pytest.approx(0.0015)
    assert math.isnan(reference["pipelined_s"])


def test_the_report_has_the_section_its_figure_and_says_the_step_is_amortized(study_file):
    report = write_report(study_file)
    section = next(s for s in report.sections if s.key == tradeoff.KEY)
    assert [f.stem for f in section.figures] == ["speed_accuracy"]
    assert section.figures[0].png.is_file()
    text = report.markdown.read_text()
    assert tradeoff.TITLE in text and "amortized" in text
    # the fastest reduction within one point of accuracy: H=4 (2.75x, -1 point); top-k loses 4
    assert any(f.startswith("p2p H=4: 2.75× faster") for f in section.findings), section.findings
    assert (study_file.parent / "report" / "tables" / "speed_accuracy.csv").is_file()


def test_a_study_without_reductions_skips_the_section(tmp_path):
    records = [_record("dense", rep) for rep in (0, 1)]
    study = load_study(write_records(tmp_path / "plain" / "results.jsonl", records))
    section = tradeoff.build(study, tmp_path / "figures")
    assert not section.tables and section.skipped
    assert "no run used a communication reduction" in section.skipped[0]


def test_sparse_rows_and_partitionings_are_reductions_with_their_partitioning_time(tmp_path):
    records = [_record("dense", rep) for rep in (0, 1)]
    for rep, (data_s, rows_s) in enumerate(((0.4, 0.01), (0.6, 0.03))):
        record = _record("topk", rep)  # its bytes, times and accuracy; the settings replaced
        record["run_id"] = f"sparse-r{rep}"
        sparse = {"sparse_exchange": "sparse", "data_partition": "graph",
                  "param_partition": "by-use"}  # fmt: skip
        record["factors"] = {"arch": "p2p", **sparse}
        record["config"].update(compression="none", **sparse)
        record["comm"]["partition"] = {"data_partition_s": data_s, "param_partition_s": rows_s}
        records.append(record)
    study = load_study(write_records(tmp_path / "sparse" / "results.jsonl", records))
    table = tradeoff.tradeoff_table(study)
    assert sorted(table["reduction"]) == ["none", "sparse rows, data graph, rows by-use"]
    row = _row(table, "sparse rows, data graph, rows by-use")
    assert not row["reference"]
    assert row["bytes_fewer"] == pytest.approx(50.0)
    assert row["speedup"] == pytest.approx(11.0 / 5.5)
    assert row["partition_s"] == pytest.approx((0.41 + 0.63) / 2)
    assert math.isnan(_row(table, "none")["partition_s"])


def test_a_reduction_is_compared_with_the_reference_of_its_own_other_settings(tmp_path):
    # two vocabularies: each sparse run against the dense run of its own vocabulary
    records = []
    for vocab, dense_bytes, sparse_bytes in ((2000, 800_000, 400_000), (20000, 5_400_000, 450_000)):
        for exchange, sent in (("dense", dense_bytes), ("sparse", sparse_bytes)):
            record = _record("dense", 0)
            record["run_id"] = f"{exchange}-{vocab}"
            record["factors"] = {"arch": "p2p", "sparse_exchange": exchange, "vocab_size": vocab}
            record["config"].update(sparse_exchange=exchange, vocab_size=vocab)
            record["comm"]["bytes_sent_per_step"] = sent
            records.append(record)
    table = tradeoff.tradeoff_table(
        load_study(write_records(tmp_path / "v" / "results.jsonl", records))
    )
    sparse = table[table["reduction"] == "sparse rows"].set_index("config")["bytes_fewer"]
    assert sparse.to_dict() == {
        "arch=p2p sparse_exchange=sparse vocab_size=2000": pytest.approx(2.0),
        "arch=p2p sparse_exchange=sparse vocab_size=20000": pytest.approx(12.0),
    }


def test_the_time_split_has_a_bar_per_reduction_with_the_overlap_pieces_gained(study_file):
    from archbench.analysis import timesplit

    records = [_record(name, rep) for name in CONFIGS for rep in (0, 1)]
    for record in records:  # a compute phase of 4 ms; the rest of the median step exposed
        step = record["timing"]["step_s_median"]
        record["timing"].update(compute_s_median=0.004, comm_s_median=step - 0.004)
        record["timing"]["exposed_comm_s"] = step - 0.004
    study_file = write_records(study_file.parent / "timed.jsonl", records)
    table = timesplit.timesplit_table(load_study(study_file))
    # the same settings compared: a bar per reduction, the unreduced one first
    assert list(table["reduction"]) == ["none", "H=4", "pieces ≤ 0.05 MB, priority", "topk"]
    pieces = table[table["reduction"] == "pieces ≤ 0.05 MB, priority"].iloc[0]
    assert pieces["pipelined_s"] == pytest.approx(0.002)
    assert table[table["reduction"] != "pieces ≤ 0.05 MB, priority"]["pipelined_s"].isna().all()
    assert "pieces ≤ 0.05 MB" in timesplit.bar_label(pieces, with_link=False)
    findings = timesplit.timesplit_findings(table)
    compared = [f for f in findings if "with no reduction" in f]
    assert len(compared) == 1 and "(2.00 ms of it with both phases at once)" in compared[0]
    # without reductions: one bar per architecture and workers, as before
    plain = load_study(
        write_records(study_file.parent / "plain.jsonl", [_record("dense", r) for r in (0, 1)])
    )
    assert "reduction" not in timesplit.timesplit_table(plain).columns

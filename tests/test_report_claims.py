"""The claims section's verdicts, worked by hand on records with known throughputs.

The records carry only what the claims read (throughput, time split, placement by hosts and
roles), so each verdict follows from numbers chosen here: the check is of the judging logic, the
real runs' numbers are the demo's business."""

from __future__ import annotations

from pathlib import Path

from record_files import timed_record, write_records

from archbench.analysis.claims import claims_table, findings
from archbench.analysis.fmt import placement_label
from archbench.analysis.load import format_level, load_study, normalise_placement


def _record(run_id: str, arch: str, rate: float, exposed: float, placement: str = "") -> dict:
    """Two workers; a PS run's server beside a worker unless `placement` says otherwise."""
    hosts, factors = None, {"arch": arch, "workers": 2}
    if arch == "ps":
        hosts = {"dedicated": ["n1", "n2", "n3"], "one-host": ["n1", "n1", "n1"]}.get(
            placement, ["n1", "n1", "n2"]
        )
        factors["placement"] = placement
    timing = {"exposed_comm_s": exposed * 64 / rate, "compute_s_median": 0.001}
    return timed_record(run_id, arch, 2, rate, hosts=hosts, timing=timing, factors=factors)


def test_verdicts_follow_the_intervals(tmp_path: Path) -> None:
    records = []
    # ring clearly faster than p2p; p2p and co-located ps indistinguishable; p2p vs dedicated ps
    # clearly the other way round; dedicated ps 3x slower than co-located (slower: agrees); every
    # process on one host 3x as fast as co-located (inside 2-4x) and 9x a dedicated host's.
    rates = {
        "ring": [1000, 1010, 990],
        "p2p": [500, 505, 495],
        "ps-colocated": [480, 530, 500],
        "ps-dedicated": [166, 167, 168],
        "ps-one-host": [1500, 1510, 1490],
    }
    for name, values in rates.items():
        arch, _, placement = name.partition("-")
        for index, rate in enumerate(values):
            records.append(_record(f"{name}-{index}", arch, rate, 0.7, placement))
    path = write_records(tmp_path / "results.jsonl", records)

    study = load_study(path)
    # the records' spelling in the data; the report's label only where it is shown
    assert set(study.frame["placement"].dropna()) == {"colocated", "dedicated", "one-host"}
    table = claims_table(study).set_index("comparison")
    assert table.loc["ring ÷ p2p", "verdict"] == "agrees"
    assert table.loc["ring ÷ p2p", "ratio"] == 2.0
    assert table.loc["p2p ÷ ps (co-located)", "verdict"] == "inconclusive"
    assert table.loc["p2p ÷ ps (dedicated)", "verdict"] == "agrees"
    # The order is a claim about networked configurations: a PS with every process on one host
    # (3x p2p's rate here) crosses no link and is claim 2's comparison, not a contradiction.
    ordering = table[table["claim"] == "ordering"]
    assert len(ordering) == 3 and not any("one host" in name for name in ordering.index), ordering
    placement = table.loc["co-located ÷ dedicated"]
    assert placement["verdict"] == "agrees" and 2.9 < placement["ratio"] < 3.1
    assert placement["claimed"].startswith("> 1×")
    network = table.loc["one host ÷ co-located"]
    assert network["verdict"] == "agrees" and 2.8 < network["ratio"] < 3.2
    assert table.loc["one host ÷ dedicated", "verdict"] == "contradicts (larger cost)"
    assert "communication-bound" in table.loc["ring ÷ p2p", "why"]

    sentences = findings(claims_table(load_study(path)))
    assert any("2 agrees, 1 inconclusive" in sentence for sentence in sentences)
    assert any("one local server" in sentence and "1 agrees" in sentence for sentence in sentences)


def test_a_compute_bound_workload_is_named_so(tmp_path: Path) -> None:
    records = [_record(f"ring-{i}", "ring", 1000 + i, 0.1) for i in range(2)]
    records += [_record(f"p2p-{i}", "p2p", 1200 + i, 0.1) for i in range(2)]
    path = write_records(tmp_path / "results.jsonl", records)
    (row,) = claims_table(load_study(path)).to_dict("records")
    assert row["verdict"] == "contradicts"
    assert "compute-bound" in row["why"]
    (sentence,) = findings(claims_table(load_study(path)))
    assert "no setting of this study was communication-bound" in sentence


def test_a_placement_is_colocated_in_the_data_and_co_located_where_shown() -> None:
    assert normalise_placement("hostfiles/ps-colocated.txt") == "colocated"
    assert normalise_placement("beside") == "colocated"
    assert normalise_placement("dedicated") == "dedicated"
    assert format_level("colocated") == placement_label("colocated") == "co-located"
    assert format_level("dedicated") == "dedicated" and format_level("one-host") == "one-host"
    assert format_level(2.0) == "2"


def test_the_order_gives_each_architectures_link_use_beside_its_verdict(tmp_path: Path) -> None:
    def metered(record: dict, sent: float, exchange_s: float) -> dict:
        record["timing"]["comm_s_median"] = exchange_s
        record["fidelity"] = {
            "emulated": True,
            "nodes": {
                host: {"wire_bytes_sent_per_step": sent, "wire_bytes_received_per_step": sent / 2}
                for host in record["cluster"]["hosts"]
            },
        }
        return record

    # 1 Gbit is 125 MB/s: 0.9 MB in 10 ms is 72% of it, in 20 ms 36%.
    records = [metered(_record(f"ring-{i}", "ring", 1000 + i, 0.7), 0.9e6, 0.010) for i in range(2)]
    records += [metered(_record(f"p2p-{i}", "p2p", 600 + i, 0.7), 0.9e6, 0.020) for i in range(2)]
    path = write_records(tmp_path / "results.jsonl", records)
    (row,) = claims_table(load_study(path)).to_dict("records")
    assert row["why"].endswith("busiest link's use during the exchange: ring 72%, p2p 36%"), row
    # records that metered no link say nothing of it
    plain = [_record(f"ring-{i}", "ring", 1000 + i, 0.7) for i in range(2)]
    plain += [_record(f"p2p-{i}", "p2p", 600 + i, 0.7) for i in range(2)]
    (row,) = claims_table(load_study(write_records(tmp_path / "plain.jsonl", plain))).to_dict(
        "records"
    )
    assert "link's use" not in row["why"]

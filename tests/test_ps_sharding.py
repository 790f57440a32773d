"""Parameter-server placement and cluster layout, decided without starting any process."""

from __future__ import annotations

import json

import pytest

from archbench.common.errors import UsageError
from archbench.ps.cluster_spec import (
    layout_from_tf_config,
    pick_free_port,
    role_of_rank,
    tf_config_rank_order,
)
from archbench.ps.sharding import VariableInfo, balanced, make_plan, round_robin
from archbench.runtime.launch import detect_place


@pytest.fixture(scope="module")
def wide_mlp_variables() -> list[VariableInfo]:
    from archbench.ps.sharding import variable_infos
    from archbench.workloads.models import build_model

    return variable_infos(build_model("wide_mlp", (28, 28, 1), 10, seed=1))


def covered_rows(plan) -> dict[int, list[tuple[int, int]]]:
    rows: dict[int, list[tuple[int, int]]] = {}
    for shard in plan.shards:
        rows.setdefault(shard.variable, []).append((shard.row_start, shard.row_end))
    return rows


def assert_every_row_held_once(plan) -> None:
    rows = covered_rows(plan)
    assert sorted(rows) == list(range(len(plan.variables)))
    for index, ranges in rows.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == plan.variables[index].rows
        for (_, end), (start, _) in zip(ranges, ranges[1:]):
            assert end == start, f"variable {index}: gap or overlap at row {end}"
    assert sum(plan.bytes_per_server()) == plan.total_bytes


@pytest.mark.parametrize("servers", [2, 3])
def test_balanced_wide_mlp_holds_nearly_equal_bytes_per_server(wide_mlp_variables, servers):
    plan = balanced(wide_mlp_variables, servers)
    held = plan.bytes_per_server()
    assert max(held) <= 1.2 * min(held), held
    assert_every_row_held_once(plan)
    # the 4096 x 4096 matrix alone is more than half the model: it has to be cut
    assert any("hidden2/kernel" in name for name in plan.partitioned)


def test_round_robin_places_whole_variables_in_turn_and_records_the_imbalance(
    wide_mlp_variables,
):
    plan = round_robin(wide_mlp_variables, 2)
    assert [s.ps_task for s in plan.shards] == [i % 2 for i in range(len(wide_mlp_variables))]
    assert plan.partitioned == []
    assert_every_row_held_once(plan)
    # kernels (even positions) all land on server 0: far from balanced, and the record says so
    summary = plan.summary()
    assert summary["imbalance"] > 100
    assert summary["bytes_per_server"] == plan.bytes_per_server()


def test_balanced_never_cuts_small_variables_and_is_deterministic():
    variables = [
        VariableInfo("kernel", (784, 128), 4),
        VariableInfo("bias", (128,), 4),
        VariableInfo("head", (128, 10), 4),
        VariableInfo("head_bias", (10,), 4),
    ]
    plan = balanced(variables, 2)
    assert plan.partitioned == ["kernel"]
    assert plan == balanced(list(variables), 2)
    assert max(plan.bytes_per_server()) <= 1.01 * min(plan.bytes_per_server())
    assert_every_row_held_once(plan)
    one = make_plan("balanced", variables, 1)
    assert one.partitioned == [] and one.bytes_per_server() == [plan.total_bytes]


def test_unknown_sharding_is_refused():
    with pytest.raises(ValueError, match="unknown sharding"):
        make_plan("random", [VariableInfo("v", (2,), 4)], 2)


def test_roles_follow_rank_order():
    assert [role_of_rank(r, 2) for r in range(5)] == ["ps", "ps", "chief", "worker", "worker"]


def tf_config(kind: str, index: int, chief: bool = True) -> str:
    cluster = {"ps": ["h1:1000", "h2:1000"], "worker": ["h3:1000", "h3:1001"]}
    if chief:
        cluster["chief"] = ["h4:1000"]
    return json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})


def test_tf_config_gives_ranks_in_ps_chief_worker_order(monkeypatch):
    for variable in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("TF_CONFIG", tf_config("worker", 1))
    place = detect_place()
    assert (place.rank, place.size, place.launcher) == (4, 5, "tf_config")
    assert (place.local_rank, place.local_size) == (1, 2)  # two tasks on h3
    layout = layout_from_tf_config(2, tf_config("worker", 1))
    assert layout.rank == 4
    assert layout.workers == ("h4:1000", "h3:1000", "h3:1001")  # the chief is worker 0
    assert [t.describe().split(" (")[0] for t in layout.tasks][:3] == [
        "parameter server ps/0",
        "parameter server ps/1",
        "chief worker worker/0",
    ]
    order = tf_config_rank_order({"ps": ["a:1"], "chief": [], "worker": ["b:1"]})
    assert order == [("ps", 0, "a:1"), ("worker", 0, "b:1")]


@pytest.mark.parametrize(
    "text,num_ps,message",
    [
        (tf_config("ps", 0), 1, "lists 2 ps tasks but --num-ps is 1"),
        ("{not json", 2, "TF_CONFIG is not valid"),
        (tf_config("worker", 7), 2, "task worker/7 is not in its cluster"),
    ],
)
def test_bad_tf_config_is_a_usage_error(text, num_ps, message):
    with pytest.raises(UsageError, match=message):
        layout_from_tf_config(num_ps, text)


def test_picked_ports_are_free_and_below_the_ephemeral_range():
    import socket

    port = pick_free_port()
    assert 20000 <= port <= 32767
    with socket.socket() as probe:
        probe.bind(("", port))

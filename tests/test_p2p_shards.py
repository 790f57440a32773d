"""The p2p shard plan and send schedules: pure arithmetic, no processes."""

from __future__ import annotations

import pytest

from archbench.p2p.exchange import send_order
from archbench.p2p.shards import ShardPlan


@pytest.mark.parametrize("elements,workers", [(101770, 2), (101770, 3), (10, 4), (3, 5), (7, 1)])
def test_shards_are_contiguous_cover_everything_and_differ_by_at_most_one(elements, workers):
    plan = ShardPlan(elements, workers)
    ranges = [plan.bounds(owner) for owner in range(workers)]
    assert ranges[0][0] == 0 and ranges[-1][1] == elements
    assert all(ranges[k][1] == ranges[k + 1][0] for k in range(workers - 1))
    lengths = [plan.length(owner) for owner in range(workers)]
    assert sum(lengths) == elements and max(lengths) - min(lengths) <= 1
    # deterministic: a plan built again says the same
    assert ShardPlan(elements, workers).as_record() == plan.as_record()


def test_mlp_plan_for_three_workers_is_the_recorded_one():
    record = ShardPlan(101770, 3).as_record()
    assert [(o["start"], o["stop"], o["bytes"]) for o in record["owners"]] == [
        (0, 33924, 135696),
        (33924, 67847, 135692),
        (67847, 101770, 135692),
    ]


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
def test_bytes_per_step_are_w_minus_1_over_w_of_gradient_and_parameter_bytes(workers):
    elements = 1000 * workers  # divisible: the analytic count is exact
    plan = ShardPlan(elements, workers)
    share = (workers - 1) * plan.total_bytes // workers
    for rank in range(workers):
        assert plan.bytes_sent_per_step(rank) == 2 * share
        assert plan.bytes_received_per_step(rank) == 2 * share
    # uneven shards: every byte sent is received by someone
    uneven = ShardPlan(1001, workers)
    assert sum(uneven.bytes_sent_per_step(r) for r in range(workers)) == sum(
        uneven.bytes_received_per_step(r) for r in range(workers)
    )


def test_schedules_naive_is_rank_order_and_staggered_is_a_permutation_per_round():
    assert [send_order(r, 4, "naive") for r in range(4)] == [
        [1, 2, 3],
        [0, 2, 3],
        [0, 1, 3],
        [0, 1, 2],
    ]
    staggered = [send_order(r, 4, "staggered") for r in range(4)]
    assert staggered[1] == [2, 3, 0]
    for round_index in range(3):
        targets = [staggered[r][round_index] for r in range(4)]
        assert sorted(targets) == [0, 1, 2, 3] and all(t != r for r, t in enumerate(targets))
    # naive: in round 1 every rank but 0 sends to rank 0 (the incast the schedule exists to show)
    assert [send_order(r, 4, "naive")[0] for r in range(1, 4)] == [0, 0, 0]
    with pytest.raises(ValueError, match="unknown p2p schedule"):
        send_order(0, 2, "random")

"""The PS shard plan has one owner (archbench.ps.sharding): the plan the performance model prices
is the plan the PS trainer builds, for a wide MLP and for a Keras application."""

from __future__ import annotations

import pytest

from archbench.perfmodel.model import formulas as F
from archbench.perfmodel.model.inputs import StepConfig, ps_shards
from archbench.perfmodel.model.modelinfo import ps_plan
from archbench.perfmodel.model.predictor import default_placement
from archbench.ps.sharding import ShardPlan, plan_for_model
from archbench.workloads.models import build_model

CASES = [("wide_mlp", (28, 28, 1), 10), ("resnet50", (32, 32, 3), 10)]


@pytest.mark.parametrize("model,shape,classes", CASES)
@pytest.mark.parametrize("servers", [2, 3])
@pytest.mark.parametrize("sharding", ["round-robin", "balanced"])
def test_the_model_prices_the_plan_the_trainer_builds(model, shape, classes, servers, sharding):
    # what archbench.ps.graph does on every worker (its own model, its own seed)
    built = plan_for_model(build_model(model, shape, classes, seed=7), servers, sharding)
    priced = ps_plan(model, shape, classes, servers, sharding)
    assert isinstance(priced, ShardPlan) and priced == built
    config = StepConfig(
        arch="ps", model=model, batch_size=32, param_bytes=float(built.total_bytes),
        placement=default_placement("ps", 2, servers, "dedicated", None), ps_plan=priced,
    )  # fmt: skip
    loads, counts = ps_shards(config)
    assert loads == [float(b) for b in built.bytes_per_server()]
    assert counts == built.variables_per_server()
    if sharding == "balanced" and model == "wide_mlp":
        # the planner cuts the wide matrix: every server holds about a K-th of the bytes
        assert built.partitioned and max(loads) < 1.1 * built.total_bytes / servers


def test_the_model_has_no_planner_of_its_own():
    assert not hasattr(F, "shard_plan") and not hasattr(F, "shard_assignment")

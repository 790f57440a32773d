"""The one training loop every architecture runs: schedule, timing, evaluation, statistics.

Timing rules (the numbers users compare):
- every step is timed; the first `warmup_steps` are trained but left out of the statistics;
- every `probe_every`-th step after warm-up is a probe: the same update run in two timed phases
  (compute = forward + backward; exchange = communication + update). Probe steps are left out of
  the step-time statistics, so measuring the split neither slows nor un-overlaps the timed steps;
- evaluation time is not training time: `train_s` counts training steps after warm-up only (the
  warm-up steps carry one-off tracing and connection set-up: `warmup_s`);
- a step whose loss is not finite, or final parameters that are not, end the run as Diverged;
- synthetic data is evaluated only when asked (--eval-every or --eval-samples): its labels are
  random, so its accuracy says nothing;
- with --timeline, the traced steps (archbench.timeline) are ordinary fused steps run with the
  engines' tracing on: like probes they train and count in `train_s`, and are left out of the
  step statistics (their times are kept apart, to state what tracing costs);
- with --sync-every H > 1 the loop tells the trainer the kind of each step (`archbench.runtime.localsgd`:
  sync, local, average) and keeps each timed step's kind: local steps are cheaper than averaging
  steps, so the step median alone would miss the exchange; `step_s_amortized` weighs each kind's
  median by how many steps of that kind ran after warm-up, and the throughput is computed from it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING

import numpy as np

from archbench.common.errors import Diverged, UsageError
from archbench.runtime.config import TrainConfig
from archbench.runtime.emulation import arm_caps, disarm_caps, own_cpu_meter
from archbench.runtime.emulation import factor as dilation_factor
from archbench.runtime.launch import compute_window_s, step_block_s
from archbench.runtime.localsgd import SyncSchedule
from archbench.runtime.partition import data_partition
from archbench.runtime.probes import is_probe
from archbench.workloads.data import (
    ArrayDataset,
    BatchPlan,
    SyntheticData,
    test_batches,
    train_batches,
)
from archbench.workloads.models import global_norm, parameter_digest
from archbench.workloads.task import correct_count, is_regression, per_sample_loss

if TYPE_CHECKING:  # a type only: the loop drives any Trainer and needs none of their code
    from archbench.trainers.base import Trainer

EVAL_BATCH = 1000
MAX_COMPUTE_PASSES = 1000  # bounds a probe's compute window however short a pass is
# An engine call costs tens of microseconds off a capped node: its mean over this many calls.
MIN_DISPATCH_CALLS = 20


@dataclass
class LoopResult:
    steps: int = 0
    epochs_run: int = 0
    train_s: float = 0.0  # steps after warm-up
    warmup_s: float = 0.0
    step_times: list[float] = field(default_factory=list)
    compute_times: list[float] = field(default_factory=list)
    compute_passes: list[int] = field(default_factory=list)  # passes per probe's compute phase
    # per probe: the virtual cores the process's own threads used over its window's repeated
    # passes (CPU seconds / virtual seconds; None without repeats): see archbench.cluster.cpumeter
    compute_core_shares: list[float | None] = field(default_factory=list)
    compute_window_s: float = 0.0
    # the engine's call with no forward or backward in it (`Trainer.dispatch_pass`), timed in one
    # window at the first counted probe: what a compute pass costs besides the model's work
    dispatch_s: float | None = None
    step_block_s: float = 0.0  # statistics over blocks of steps this long (a dilated node)
    steps_before_window: int = 0  # steps done when `on_timed` was called
    exchange_times: list[float] = field(default_factory=list)
    # the kind (archbench.runtime.localsgd) of each entry of step_times, of compute/exchange_times, and
    # how many steps of each kind ran after warm-up (timed and probe steps alike)
    step_kinds: list[str] = field(default_factory=list)
    probe_kinds: list[str] = field(default_factory=list)
    timed_kinds: dict[str, int] = field(default_factory=dict)
    evaluations: list[dict] = field(default_factory=list)
    last_loss: float | None = None
    final_loss: float | None = None
    test_accuracy: float | None = None
    test_rmse: float | None = None  # --loss mse: the root of the test loss
    time_to_target_s: float | None = None
    param_norm: float | None = None
    param_digest: str | None = None
    first_step_at: float | None = None  # time.time() when the first step started
    eval_s: float = 0.0
    # real seconds the loop spent neither training nor evaluating (the record's `launch.phases_s`)
    batch_wait_s: float = 0.0  # waiting for the data pipeline's next batch
    probe_window_s: float = 0.0  # the probes' compute windows (measurement, not training)


def schedule(config: TrainConfig, plan: BatchPlan) -> tuple[int, int]:
    """(total steps, epochs touched) for --epochs or --steps."""
    if plan.steps_per_epoch < 1:
        raise UsageError(
            f"global batch {plan.global_batch} is larger than the training set ({plan.train_size})"
        )
    if config.steps is not None:
        return config.steps, math.ceil(config.steps / plan.steps_per_epoch)
    return config.epochs * plan.steps_per_epoch, config.epochs


def evaluate(model, batches, loss: str = "crossentropy") -> tuple[float, float | None]:
    """(mean loss, accuracy) of the model's current parameters on the (x, y) batches: the
    cross-entropy and the share classified right, or for values (--loss mse) the mean squared
    error and None."""
    import tensorflow as tf  # deferred: the schedule and batch plan here are read without it

    total_loss, correct, count = 0.0, 0, 0
    for x, y in batches:
        outputs = model(x, training=False)
        total_loss += float(tf.reduce_sum(per_sample_loss(tf, loss, y, outputs)))
        right = correct_count(loss, outputs.numpy(), y)
        correct = None if right is None else correct + right
        count += len(y)
    return total_loss / count, None if correct is None else correct / count


def evaluates(config: TrainConfig, data: ArrayDataset | SyntheticData) -> bool:
    """Whether the chief evaluates: always on real data, on synthetic data only when asked."""
    return not isinstance(data, SyntheticData) or bool(config.eval_every or config.eval_samples)


def _finite_or_diverged(loss: float, step: int) -> None:
    """Raises Diverged when the loss of step `step` is NaN or infinite."""
    if not math.isfinite(loss):
        raise Diverged(step, f"the training loss became {loss}")


def steady_compute(
    trainer: Trainer, x, y, first_pass_s: float, window_s: float
) -> tuple[float, int]:
    """(mean seconds per pass, passes): the probe's compute phase repeated back to back until
    `window_s` is covered; without a window (no CPU quota), the probe's own pass alone. Extra
    passes change nothing: their results are dropped.

    Under a window, the passes that follow a wait are left out: the probe's own (after the
    step before) and the first after the probe's exchange. On an emulated node the first pass
    after a wait is slow, the more so the longer the wait, its threads using more than a core
    (the map study's mlp at 100 Mbit/s, W = 2 and 3: 2.1-18.8 ms a pass with both in the window,
    1.1-3.6 ms without them; 1.0-1.9 ms at 1 Gbit/s; 27-52 ms where the window began after a
    sleep as long as the exchange). Why a wait costs so much there is not settled."""
    return metered_compute(trainer, x, y, first_pass_s, window_s, None)[:2]


def metered_compute(
    trainer: Trainer,
    x,
    y,
    first_pass_s: float,
    window_s: float,
    cpu_meter: Callable[[], float] | None,
) -> tuple[float, int, float | None]:
    """`steady_compute`, and the virtual cores this process's own threads used over the repeated
    passes (their CPU seconds over their virtual seconds; None without a meter, when no pass was
    repeated or the meter could not read)."""
    if window_s <= 0:
        return first_pass_s, 1, None
    one_pass = partial(trainer.compute_pass, x, y)
    one_pass()  # the first after the exchange, left out as `steady_compute` says
    cpu_before = cpu_meter() if cpu_meter else math.nan
    started = time.perf_counter()
    one_pass()
    compute_s, passes = repeated_pass(one_pass, time.perf_counter() - started, window_s)
    virtual_s = (time.perf_counter() - started) / dilation_factor()
    cpu_s = cpu_meter() - cpu_before if cpu_meter else math.nan
    share = cpu_s / virtual_s if passes > 1 and virtual_s > 0 and math.isfinite(cpu_s) else None
    return compute_s, passes, share


def repeated_pass(
    one_pass: Callable[[], None], first_pass_s: float, window_s: float, min_passes: int = 1
) -> tuple[float, int]:
    """(mean seconds per pass, passes): `one_pass` repeated back to back until `window_s` is
    covered and at least `min_passes` ran, the first (already timed: `first_pass_s`) included."""
    total_s, passes = first_pass_s, 1
    while (total_s < window_s or passes < min_passes) and passes < MAX_COMPUTE_PASSES:
        started = time.perf_counter()
        one_pass()
        total_s += time.perf_counter() - started
        passes += 1
    return total_s / passes, passes


def dispatch_time(trainer: Trainer, x, y, window_s: float) -> float:
    """Mean seconds of the engine's call with nothing to compute (`Trainer.dispatch_pass`), over
    the same window as a probe's compute (so a capped node's periods average out too)."""
    started = time.perf_counter()
    trainer.dispatch_pass(x, y)
    first_s = time.perf_counter() - started
    return repeated_pass(
        partial(trainer.dispatch_pass, x, y), first_s, window_s, MIN_DISPATCH_CALLS
    )[0]


def batch_plan(config: TrainConfig, data: ArrayDataset | SyntheticData, workers: int) -> BatchPlan:
    """The run's batch plan: the global shuffle, or each worker's part (`--data-partition`)."""
    method = getattr(config, "data_partition", None) or "random"
    parts = None
    if method != "random" and workers > 1:
        parts = data_partition(method, data, workers, config.seed).parts
    return BatchPlan(data.train_size, config.batch_size, workers, config.seed, parts)


def run_training(
    config: TrainConfig,
    trainer: Trainer,
    data: ArrayDataset,
    log=print,
    on_timed: Callable[[], None] | None = None,
    tracer=None,
) -> LoopResult:
    """Trains this worker; the chief also evaluates. Every worker runs the same step sequence.
    `tracer` (--timeline: archbench.timeline.tracer.Tracer) runs the steps it traces.

    On a time-dilated node the thread caps are armed before the first timed step (start-up and
    warm-up run outside them) and disarmed when training ends; `on_timed` is called once the
    first timed step is done, when every rank of a synchronous job has armed its caps."""
    try:
        return _train(config, trainer, data, log, on_timed, tracer)
    finally:
        disarm_caps()


def _train(
    config: TrainConfig,
    trainer: Trainer,
    data: ArrayDataset,
    log,
    on_timed: Callable[[], None] | None,
    tracer,
) -> LoopResult:
    plan = batch_plan(config, data, trainer.num_workers)
    total_steps, epochs = schedule(config, plan)
    sync = SyncSchedule.for_config(config, total_steps)
    result = LoopResult(
        compute_window_s=compute_window_s(config.compute_window_ms), step_block_s=step_block_s()
    )
    with_test = evaluates(config, data)
    eval_batch = (
        min(EVAL_BATCH, config.batch_size) if isinstance(data, SyntheticData) else EVAL_BATCH
    )
    eval_every = config.eval_every or plan.steps_per_epoch
    epoch_losses: list[float] = []
    epoch_train_s = 0.0
    epoch_start_step = 0

    def run_evaluation(epoch: int, step: int) -> None:
        loss, accuracy = None, None
        if with_test:
            started = time.perf_counter()
            loss, accuracy = evaluate(
                trainer.eval_model(),
                test_batches(data, config.eval_samples, eval_batch),
                config.loss,
            )
            result.eval_s += time.perf_counter() - started
        point = {
            "epoch": epoch,
            "step": step,
            "train_s": result.train_s,
            "loss": float(np.mean(epoch_losses)) if epoch_losses else None,
            "test_loss": loss,
            "test_accuracy": accuracy,
            "test_rmse": math.sqrt(loss)
            if loss is not None and is_regression(config.loss)
            else None,
            "samples_per_s": (step - max(epoch_start_step, config.warmup_steps))
            * plan.global_batch
            / epoch_train_s
            if epoch_train_s
            else None,
        }
        result.evaluations.append(point)
        result.final_loss, result.test_accuracy = loss, accuracy
        result.test_rmse = point["test_rmse"]
        target = config.target_accuracy
        reached = accuracy is not None and target is not None and accuracy >= target
        if reached and result.time_to_target_s is None:
            result.time_to_target_s = result.train_s
        tested = (
            "no test"
            if not with_test
            else f"test loss {loss:.4f}, test RMSE {point['test_rmse']:.4f}"
            if accuracy is None
            else f"test loss {loss:.4f}, test accuracy {accuracy:.4f}"
        )
        log(
            f"epoch {epoch} step {step}/{total_steps}: train loss {point['loss']:.4f}, "
            f"{tested}, train time {result.train_s:.1f}s"
        )

    step = 0
    cpu_meter: Callable[[], float] | None = None
    for epoch in range(epochs):
        steps_this_epoch = min(plan.steps_per_epoch, total_steps - step)
        batches = train_batches(data, plan, epoch, trainer.worker_index)
        epoch_losses, epoch_train_s, epoch_start_step = [], 0.0, step
        asked_at = time.perf_counter()
        for x, y in islice(batches, steps_this_epoch):
            if step > 0:  # the first batch's wait is start-up
                result.batch_wait_s += time.perf_counter() - asked_at
            if result.first_step_at is None:
                result.first_step_at = time.time()
            if step == config.warmup_steps:
                arm_caps()
            kind = sync.kind(step)
            trainer.begin_step(kind)
            if step >= config.warmup_steps:
                result.timed_kinds[kind] = result.timed_kinds.get(kind, 0) + 1
            if tracer is not None and tracer.traces(step):
                loss, elapsed = tracer.run_step(step, kind, partial(trainer.train_step, x, y))
            elif is_probe(step, config.warmup_steps, config.probe_every):
                start = time.perf_counter()
                loss, compute_s, exchange_s = trainer.probe_step(x, y)
                elapsed = time.perf_counter() - start
                if step >= config.warmup_steps:
                    # after the step's timing: the window is measurement, not training
                    window_started = time.perf_counter()
                    if cpu_meter is None:  # the caps are armed by now
                        cpu_meter = own_cpu_meter()
                    compute_s, passes, core_share = metered_compute(
                        trainer, x, y, compute_s, result.compute_window_s, cpu_meter
                    )
                    result.probe_window_s += time.perf_counter() - window_started
                    result.compute_passes.append(passes)
                    result.compute_core_shares.append(core_share)
                    result.compute_times.append(compute_s)
                    result.exchange_times.append(exchange_s)
                    result.probe_kinds.append(kind)
                    if result.dispatch_s is None:
                        window_started = time.perf_counter()
                        result.dispatch_s = dispatch_time(trainer, x, y, result.compute_window_s)
                        result.probe_window_s += time.perf_counter() - window_started
                else:  # the tracing probe: the empty call is traced here too, not when timed
                    trainer.dispatch_pass(x, y)
            else:
                start = time.perf_counter()
                with tracer.primer(step) if tracer is not None else nullcontext():
                    loss = trainer.train_step(x, y)
                elapsed = time.perf_counter() - start
                if step >= config.warmup_steps:
                    result.step_times.append(elapsed)
                    result.step_kinds.append(kind)
            if step < config.warmup_steps:
                # One-off costs (tracing, connection set-up) are reported apart from training time.
                result.warmup_s += elapsed
            else:
                result.train_s += elapsed
                epoch_train_s += elapsed
            _finite_or_diverged(loss, step + 1)  # counted from 1, as the log counts steps
            if step == config.warmup_steps and on_timed is not None:
                on_timed()
                result.steps_before_window = step + 1
            epoch_losses.append(loss)
            result.last_loss = loss
            step += 1
            if trainer.evaluates and step % eval_every == 0 and step != total_steps:
                run_evaluation(epoch, step)
            asked_at = time.perf_counter()
        result.epochs_run = epoch + 1
    result.steps = step
    if trainer.evaluates:
        run_evaluation(result.epochs_run - 1, step)
    final_weights = trainer.weights()
    result.param_norm = global_norm(final_weights)
    if not math.isfinite(result.param_norm):
        raise Diverged(step, f"the parameters became non-finite (norm {result.param_norm})")
    result.param_digest = parameter_digest(final_weights)
    return result


def quantile(values: list[float], q: float) -> float | None:
    return float(np.quantile(values, q)) if values else None


def _of_kind(values: list[float], kinds: list[str], kind: str) -> list[float]:
    return [value for value, its in zip(values, kinds) if its == kind]


def step_blocks(step_times: list[float], block_s: float) -> list[float]:
    """The mean step of each run of consecutive steps lasting at least `block_s` (the steps
    themselves when `block_s` is 0; a short last run joins the one before it).

    On a time-dilated node a thread's cap is enforced per CFS period: a step shorter than its
    quota runs at full speed and a later one pays for it, so single steps are not dilated, only
    stretches of a few periods are. Medians over such blocks keep both the dilation and the
    median's indifference to a stray slow step."""
    if block_s <= 0 or not step_times:
        return list(step_times)
    blocks: list[list[float]] = [[]]
    for step in step_times:
        if sum(blocks[-1]) >= block_s:
            blocks.append([])
        blocks[-1].append(step)
    if len(blocks) > 1 and sum(blocks[-1]) < block_s:
        blocks[-2].extend(blocks.pop())
    return [float(np.mean(block)) for block in blocks]


def amortized_step(result: LoopResult) -> tuple[float | None, dict, dict]:
    """(step seconds weighed over the kinds of step that ran after warm-up, median step per
    kind, median exchange phase per kind). With one kind (every run but --sync-every > 1) the
    step is the median itself. A kind none of whose steps was timed (each of them a probe) is
    priced at its probes' compute + exchange medians."""
    step_median = quantile(step_blocks(result.step_times, result.step_block_s), 0.5)
    counts = {kind: n for kind, n in result.timed_kinds.items() if n}
    if len(counts) <= 1:
        return step_median, {}, {}
    by_kind, comm_by_kind = {}, {}
    for kind in counts:
        steps = step_blocks(
            _of_kind(result.step_times, result.step_kinds, kind), result.step_block_s
        )
        compute = quantile(_of_kind(result.compute_times, result.probe_kinds, kind), 0.5)
        exchange = quantile(_of_kind(result.exchange_times, result.probe_kinds, kind), 0.5)
        comm_by_kind[kind] = exchange
        if steps:
            by_kind[kind] = quantile(steps, 0.5)
        elif compute is not None and exchange is not None:
            by_kind[kind] = compute + exchange
        else:
            by_kind[kind] = None
    if any(value is None for value in by_kind.values()):
        return step_median, by_kind, comm_by_kind
    amortized = sum(counts[kind] * by_kind[kind] for kind in counts) / sum(counts.values())
    return amortized, by_kind, comm_by_kind


def step_statistics(result: LoopResult, global_batch: int, warmup_steps: int) -> dict:
    """The `timing` fields derived from the per-step times (medians and spread; on a dilated
    node, of blocks of steps spanning a few of the caps' periods: see `step_blocks`)."""

    blocks = step_blocks(result.step_times, result.step_block_s)
    step_median = quantile(blocks, 0.5)
    # --sync-every > 1: the step over a whole round of local and averaging steps
    step_amortized, step_by_kind, comm_by_kind = amortized_step(result)
    compute_median = quantile(result.compute_times, 0.5)
    exchange_median = quantile(result.exchange_times, 0.5)
    exposed = None
    if step_amortized is not None and compute_median is not None:
        exposed = max(0.0, step_amortized - compute_median)
    timed = result.step_times
    by_kind = {}
    if step_by_kind:
        by_kind = {"step_s_median_by_kind": step_by_kind, "comm_s_median_by_kind": comm_by_kind}
    return {
        "step_s_median": step_median,
        "step_s_p10": quantile(blocks, 0.1),
        "step_s_p90": quantile(blocks, 0.9),
        "step_s_mean": float(np.mean(timed)) if timed else None,
        "step_s_std": float(np.std(timed, ddof=1)) if len(timed) > 1 else None,
        "timed_steps": len(timed),
        "step_blocks": len(blocks),  # what the median and percentiles are over
        "step_block_s": result.step_block_s,
        "compute_s_median": compute_median,
        "comm_s_median": exchange_median,
        "exposed_comm_s": exposed,
        "probe_steps": len(result.compute_times),
        "compute_window_s": result.compute_window_s,
        "compute_passes_median": quantile(result.compute_passes, 0.5),
        "step_s_amortized": step_amortized,
        **by_kind,
        "samples_per_s": global_batch / step_amortized if step_amortized else None,
        "samples_per_s_wall": (result.steps - warmup_steps) * global_batch / result.train_s
        if result.train_s
        else None,
        "warmup_s": result.warmup_s,
    }

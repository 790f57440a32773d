"""The one training loop every architecture runs: schedule, timing, evaluation, statistics.

Timing rules (the numbers users compare):
- every step is timed; the first `warmup_steps` are trained but left out of the statistics;
- every `probe_every`-th step after warm-up is a probe: the same update run in two timed phases
  (compute = forward + backward; exchange = communication + update). Probe steps are left out of
  the step-time statistics, so measuring the split neither slows nor un-overlaps the timed steps;
- evaluation time is not training time: `train_s` counts training steps after warm-up only (the
  warm-up steps carry one-off tracing and connection set-up: `warmup_s`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from archbench.config import TrainConfig
from archbench.data import ArrayDataset, BatchPlan, test_arrays, train_batches
from archbench.models import global_norm, parameter_digest
from archbench.trainers.base import Trainer

EVAL_BATCH = 1000


@dataclass
class LoopResult:
    steps: int = 0
    epochs_run: int = 0
    train_s: float = 0.0  # steps after warm-up
    warmup_s: float = 0.0
    step_times: list[float] = field(default_factory=list)
    compute_times: list[float] = field(default_factory=list)
    exchange_times: list[float] = field(default_factory=list)
    evaluations: list[dict] = field(default_factory=list)
    last_loss: float | None = None
    final_loss: float | None = None
    test_accuracy: float | None = None
    time_to_target_s: float | None = None
    param_norm: float | None = None
    param_digest: str | None = None


def schedule(config: TrainConfig, plan: BatchPlan) -> tuple[int, int]:
    """(total steps, epochs touched) for --epochs or --steps."""
    if plan.steps_per_epoch < 1:
        from archbench.errors import UsageError

        raise UsageError(
            f"global batch {plan.global_batch} is larger than the training set ({plan.train_size})"
        )
    if config.steps is not None:
        return config.steps, math.ceil(config.steps / plan.steps_per_epoch)
    return config.epochs * plan.steps_per_epoch, config.epochs


def evaluate(model, x_test: np.ndarray, y_test: np.ndarray) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of the model's current parameters on the test arrays."""
    import tensorflow as tf

    total_loss, correct = 0.0, 0
    for start in range(0, len(x_test), EVAL_BATCH):
        logits = model(x_test[start : start + EVAL_BATCH], training=False)
        labels = y_test[start : start + EVAL_BATCH]
        losses = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        total_loss += float(tf.reduce_sum(losses))
        correct += int(np.sum(np.argmax(logits.numpy(), axis=-1) == labels))
    return total_loss / len(x_test), correct / len(x_test)


def is_probe(step: int, config: TrainConfig) -> bool:
    """Probe steps: the periodic ones after warm-up, plus the last warm-up step, whose only job
    is to trace the two phase functions so that no counted probe pays for tracing."""
    if config.probe_every <= 0:
        return False
    if step < config.warmup_steps:
        return step == config.warmup_steps - 1
    return (step - config.warmup_steps) % config.probe_every == config.probe_every - 1


def run_training(
    config: TrainConfig, trainer: Trainer, data: ArrayDataset, log=print
) -> LoopResult:
    """Trains this worker; the chief also evaluates. Every worker runs the same step sequence."""
    plan = BatchPlan(data.train_size, config.batch_size, trainer.num_workers, config.seed)
    total_steps, epochs = schedule(config, plan)
    result = LoopResult()
    x_test, y_test = test_arrays(data, config.eval_samples)
    eval_every = config.eval_every or plan.steps_per_epoch
    epoch_losses: list[float] = []
    epoch_train_s = 0.0
    epoch_start_step = 0

    def run_evaluation(epoch: int, step: int) -> None:
        loss, accuracy = evaluate(trainer.eval_model(), x_test, y_test)
        point = {
            "epoch": epoch,
            "step": step,
            "train_s": result.train_s,
            "loss": float(np.mean(epoch_losses)) if epoch_losses else None,
            "test_loss": loss,
            "test_accuracy": accuracy,
            "samples_per_s": (step - max(epoch_start_step, config.warmup_steps))
            * plan.global_batch
            / epoch_train_s
            if epoch_train_s
            else None,
        }
        result.evaluations.append(point)
        result.final_loss, result.test_accuracy = loss, accuracy
        target = config.target_accuracy
        if target is not None and result.time_to_target_s is None and accuracy >= target:
            result.time_to_target_s = result.train_s
        log(
            f"epoch {epoch} step {step}/{total_steps}: train loss {point['loss']:.4f}, "
            f"test loss {loss:.4f}, test accuracy {accuracy:.4f}, train time {result.train_s:.1f}s"
        )

    step = 0
    for epoch in range(epochs):
        steps_this_epoch = min(plan.steps_per_epoch, total_steps - step)
        batches = train_batches(data, plan, epoch, trainer.worker_index).take(steps_this_epoch)
        epoch_losses, epoch_train_s, epoch_start_step = [], 0.0, step
        for x, y in batches:
            if is_probe(step, config):
                start = time.perf_counter()
                loss, compute_s, exchange_s = trainer.probe_step(x, y)
                elapsed = time.perf_counter() - start
                if step >= config.warmup_steps:
                    result.compute_times.append(compute_s)
                    result.exchange_times.append(exchange_s)
            else:
                start = time.perf_counter()
                loss = trainer.train_step(x, y)
                elapsed = time.perf_counter() - start
                if step >= config.warmup_steps:
                    result.step_times.append(elapsed)
            if step < config.warmup_steps:
                # One-off costs (tracing, connection set-up) are reported apart from training time.
                result.warmup_s += elapsed
            else:
                result.train_s += elapsed
                epoch_train_s += elapsed
            epoch_losses.append(loss)
            result.last_loss = loss
            step += 1
            if trainer.is_chief and step % eval_every == 0 and step != total_steps:
                run_evaluation(epoch, step)
        result.epochs_run = epoch + 1
    result.steps = step
    if trainer.is_chief:
        run_evaluation(result.epochs_run - 1, step)
    final_weights = trainer.weights()
    result.param_norm = global_norm(final_weights)
    result.param_digest = parameter_digest(final_weights)
    return result


def quantile(values: list[float], q: float) -> float | None:
    return float(np.quantile(values, q)) if values else None


def step_statistics(result: LoopResult, global_batch: int, warmup_steps: int) -> dict:
    """The `timing` fields derived from the per-step times (medians and spread)."""

    step_median = quantile(result.step_times, 0.5)
    compute_median = quantile(result.compute_times, 0.5)
    exchange_median = quantile(result.exchange_times, 0.5)
    exposed = None
    if step_median is not None and compute_median is not None:
        exposed = max(0.0, step_median - compute_median)
    timed = result.step_times
    return {
        "step_s_median": step_median,
        "step_s_p10": quantile(timed, 0.1),
        "step_s_p90": quantile(timed, 0.9),
        "step_s_mean": float(np.mean(timed)) if timed else None,
        "step_s_std": float(np.std(timed, ddof=1)) if len(timed) > 1 else None,
        "timed_steps": len(timed),
        "compute_s_median": compute_median,
        "comm_s_median": exchange_median,
        "exposed_comm_s": exposed,
        "probe_steps": len(result.compute_times),
        "samples_per_s": global_batch / step_median if step_median else None,
        "samples_per_s_wall": (result.steps - warmup_steps) * global_batch / result.train_s
        if result.train_s
        else None,
        "warmup_s": result.warmup_s,
    }

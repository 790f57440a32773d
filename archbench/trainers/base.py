"""The one interface every architecture implements, and the pieces they share.

An architecture differs only in how gradients and parameters travel. The training loop
(`archbench.runtime.loop`) drives any Trainer the same way:

    trainer.setup()                      # model, optimizer, communication
    if trainer.is_worker:
        trainer.begin_step(kind)         # before each step: sync, local or average (--sync-every)
        loss = trainer.train_step(x, y)  # one fused, timed synchronous (or async) step
        loss, compute_s, exchange_s = trainer.probe_step(x, y)  # the same step in two timed phases
        trainer.weights()                # current parameters (numpy), for evaluation and the norm
    else:
        trainer.serve()                  # e.g. a parameter server: until the workers finish
    trainer.finish()                     # collective end: gathers per-rank facts, stops servers

`probe_step` must perform exactly the same update as `train_step` (it is a real training step);
it only splits the time: compute = forward + backward, exchange = moving gradients/parameters
plus applying the update.

The kind of step (`self.step_kind`, see `archbench.runtime.localsgd`) is `sync` for every step unless
`--sync-every` > 1: then a `local` step applies this worker's own gradient with its own
optimizer state and sends nothing (its "exchange" phase is the local update alone), and an
`average` step does the same and then averages the parameters over the workers.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod

import numpy as np

from archbench.common.archs import arch
from archbench.runtime.config import TrainConfig, TrainSettings, settings_view
from archbench.runtime.launch import ProcessPlace
from archbench.runtime.localsgd import AVERAGE, SYNC, SyncSchedule
from archbench.timeline.recorder import NULL_RECORDER, Recorder
from archbench.workloads.data import ArrayDataset
from archbench.workloads.models import build_for_data
from archbench.workloads.task import keras_loss


class Trainer(ABC):
    arch: str = "?"
    # Every setting this class's code reads, itself or through a helper it hands `self.config`
    # to: all it receives (`settings_from`). A subclass adds its own to its base's.
    SETTINGS_READ: tuple[str, ...] = (
        "arch",  # roles, the sync schedule
        "num_ps",  # roles
        "sync_every",  # SyncSchedule.for_config
        "sync_every_warmup_steps",  # SyncSchedule.for_config
    )

    def __init__(self, config: TrainSettings, place: ProcessPlace, data: ArrayDataset):
        if not isinstance(config, TrainSettings):
            # a whole TrainConfig would let the trainer read settings it does not declare
            name = type(self).__name__
            raise TypeError(f"{name} takes {name}.settings_from(config), not a TrainConfig")
        self.config = config  # only the settings in SETTINGS_READ
        self.place = place
        self.data = data
        self.model = None
        self.optimizer = None
        self.schedule = SyncSchedule.for_config(config)  # --sync-every
        self.step_kind = SYNC
        self.steps_by_kind: dict[str, int] = {}
        self.recorder = NULL_RECORDER  # records traced steps (--timeline: archbench.timeline)

    @classmethod
    def settings_from(cls, config: TrainConfig) -> TrainSettings:
        """The settings this trainer reads, taken from the run's configuration."""
        return settings_view(config, cls.SETTINGS_READ, f"{cls.__name__}Settings")

    def attach_recorder(self, recorder: Recorder) -> None:
        """--timeline: what this process records itself while a traced step runs."""
        self.recorder = recorder

    def begin_step(self, kind: str) -> None:
        """The loop says what kind of step comes next (`archbench.runtime.localsgd`), and counts it."""
        self.step_kind = kind
        self.steps_by_kind[kind] = self.steps_by_kind.get(kind, 0) + 1

    # --- roles -------------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return self.place.rank

    @property
    def world_size(self) -> int:
        return self.place.size

    @property
    def num_workers(self) -> int:
        return self.place.size

    @property
    def worker_index(self) -> int:
        """This process's slice of each global batch (0..num_workers-1)."""
        return self.place.rank

    @property
    def is_worker(self) -> bool:
        return True

    @property
    def is_chief(self) -> bool:
        """The worker that evaluates and writes the run record."""
        return self.worker_index == 0 and self.is_worker

    @property
    def evaluates(self) -> bool:
        """Whether this rank runs the evaluations during training (the chief)."""
        return self.is_chief

    def roles(self) -> list[str]:
        """Role of every rank, in rank order (the architecture's descriptor says)."""
        return arch(self.config.arch).roles(self.world_size, self.config.num_ps)

    def check_world(self, engine: str, rank: int, size: int) -> None:
        """The engine must see the job the launcher described; a lone process says it is alone."""
        if size != self.place.size or rank != self.place.rank:
            raise RuntimeError(
                f"{engine} sees rank {rank}/{size}, the launcher said "
                f"{self.place.rank}/{self.place.size}"
            )
        if self.place.launcher == "none" and self.place.rank == 0:
            print(
                f"archbench: --arch {self.arch} started without mpirun or horovodrun: "
                "running as 1 worker",
                file=sys.stderr,
                flush=True,
            )

    # --- life cycle --------------------------------------------------------------------------
    @abstractmethod
    def setup(self) -> None:
        """Builds the model and optimizer and connects to the other processes."""

    @abstractmethod
    def train_step(self, x, y) -> float:
        """One training step; returns this worker's loss on its slice."""

    @abstractmethod
    def probe_step(self, x, y) -> tuple[float, float, float]:
        """The same step in two timed phases: (loss, compute_s, exchange_s)."""

    @abstractmethod
    def compute_pass(self, x, y) -> None:
        """Forward + backward on this worker's batch, nothing exchanged, the result dropped: the
        repeated passes of a probe's compute window (see `archbench.runtime.loop.steady_compute`)."""

    _dispatch = None  # the empty tf.function, made at the first call (the tracing probe's)

    def dispatch_pass(self, x, y) -> None:
        """The engine's call that `compute_pass` makes, with the same batch and nothing to
        compute: what a pass costs besides forward + backward (here TensorFlow's function call;
        the parameter server's trainer runs its session instead). Timed once per run
        (`timing.dispatch_s_per_rank`)."""
        if self._dispatch is None:
            self._dispatch = empty_call()
        float(self._dispatch(x, y))

    def serve(self) -> None:
        """Non-worker roles (parameter servers) run here until the workers are done."""
        raise NotImplementedError

    def weights(self) -> list[np.ndarray]:
        """The current trainable parameters of this process's model copy."""
        return [v.numpy() for v in self.model.trainable_variables]

    def eval_model(self):
        """A Keras model holding the current parameters (the chief evaluates it)."""
        return self.model

    @abstractmethod
    def allgather_object(self, value) -> list:
        """`value` from every rank, in rank order (small Python objects only)."""

    def finish(self) -> None:
        """Called by every rank after training (collective); releases communication."""

    # --- what the record says about communication --------------------------------------------
    def comm_stats(self, steps: int) -> dict:
        """Bytes this worker sent per step and in total, and how they were counted."""
        return {
            "bytes_sent_per_step": 0,
            "bytes_received_per_step": 0,
            "bytes_total": 0,
            "bytes_method": "none",
        }

    def extra_record(self) -> dict:
        """Architecture-specific record fields (merged into `comm`, e.g. shard plans, staleness).

        Called on every rank, in the same order, after training: it may communicate."""
        return {}


class KerasTrainer(Trainer):
    """A trainer whose workers hold a Keras model and a Keras optimizer in this process.

    Subclasses say how gradients travel by overriding `exchange(grads)` (used inside tf.functions)
    and, where the fused step differs from compute -> exchange -> apply (Horovod's
    DistributedGradientTape overlaps allreduce with the backward pass), `_build_fused_step`.
    """

    SETTINGS_READ = Trainer.SETTINGS_READ + (
        "loss",  # keras_loss
        "model",  # build_for_data
        "seed",  # build_for_data
        "optimizer",  # make_optimizer
        "lr",  # make_optimizer
        "momentum",  # make_optimizer
    )

    def setup(self) -> None:
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        self.model = build_for_data(self.config.model, self.data, self.config.seed)
        self.optimizer = make_optimizer(self.config)
        self.loss_fn = keras_loss(tf, self.config.loss)
        self._compute = tf.function(self._compute_gradients)
        self._exchange_and_apply = tf.function(self._exchange_apply)
        self._fused = tf.function(self._build_fused_step())
        if self.schedule.local_steps:  # --sync-every > 1
            self._local_apply = tf.function(self._apply_own)
            self._local_fused = tf.function(self._local_step)
            self._average = tf.function(self.average_parameters)

    def _compute_gradients(self, x, y):
        # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
        import tensorflow as tf

        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = self.loss_fn(y, logits)
        return loss, tape.gradient(loss, self.model.trainable_variables)

    def exchange(self, grads):
        """Gradients from this worker -> the gradients to apply (averaged over workers)."""
        return grads

    def _exchange_apply(self, grads):
        grads = self.exchange(grads)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))

    def _build_fused_step(self):
        def step(x, y):
            loss, grads = self._compute_gradients(x, y)
            self._exchange_apply(grads)
            return loss

        return step

    def _apply_own(self, grads):
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))

    def _local_step(self, x, y):
        loss, grads = self._compute_gradients(x, y)
        self._apply_own(grads)
        return loss

    def average_parameters(self) -> None:
        """Replaces every trainable parameter by its mean over the workers (traced into a
        tf.function): the communication of an `average` step. Architectures with several
        workers that accept --sync-every implement it."""
        raise NotImplementedError(f"--arch {self.arch} does not average parameters")

    def train_step(self, x, y) -> float:
        # No `recorder.call` here (p2p has one): a fused step's call holds the update and, for
        # the ring, the allreduce, so the time its ops leave uncovered cannot be said to be
        # compute, and a span over the whole step would account for every gap by construction.
        if self.step_kind == SYNC:
            return float(self._fused(x, y))
        loss = float(self._local_fused(x, y))
        if self.step_kind == AVERAGE:
            self._average()
        return loss

    def compute_pass(self, x, y) -> None:
        float(self._compute(x, y)[0])  # done only when its results exist

    def probe_step(self, x, y) -> tuple[float, float, float]:
        start = time.perf_counter()
        loss, grads = self._compute(x, y)
        loss = float(loss)  # the phase is done only when its results exist
        computed = time.perf_counter()
        if self.step_kind == SYNC:
            self._exchange_and_apply(grads)
        else:  # the local update alone, then (average) the parameters averaged
            self._local_apply(grads)
            if self.step_kind == AVERAGE:
                self._average()
        self.model.trainable_variables[0].numpy()  # waits for the update
        done = time.perf_counter()
        return loss, computed - start, done - computed


def empty_call():
    """A tf.function taking a batch and computing nothing: `dispatch_pass` for the trainers
    whose compute pass is a tf.function call."""
    # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
    import tensorflow as tf

    return tf.function(lambda x, y: tf.zeros([]))


def make_optimizer(config: TrainConfig | TrainSettings):
    # deferred: TensorFlow loads when a trainer first runs, not when its module is imported
    import tensorflow as tf

    if config.optimizer == "sgd":
        return tf.keras.optimizers.SGD(learning_rate=config.lr, momentum=config.momentum)
    raise ValueError(f"unknown optimizer {config.optimizer!r}")

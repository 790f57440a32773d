"""One trainer per architecture, behind the interface in `archbench.trainers.base`."""

from __future__ import annotations

from archbench.common.archs import arch as architecture
from archbench.runtime.config import TrainConfig
from archbench.runtime.launch import ProcessPlace
from archbench.trainers.base import Trainer
from archbench.workloads.data import ArrayDataset


def trainer_class(arch: str) -> type[Trainer]:
    """The trainer the architecture's descriptor names (imported only when used: each pulls its
    own engine)."""
    return architecture(arch).trainer_class()


def make_trainer(config: TrainConfig, place: ProcessPlace, data: ArrayDataset) -> Trainer:
    """The architecture's trainer, given only the settings it reads."""
    cls = trainer_class(config.arch)
    return cls(cls.settings_from(config), place, data)

"""One trainer per architecture, behind the interface in `archbench.trainers.base`."""

from __future__ import annotations

from archbench.archs import arch as architecture
from archbench.config import TrainConfig
from archbench.data import ArrayDataset
from archbench.launch import ProcessPlace
from archbench.trainers.base import Trainer


def trainer_class(arch: str) -> type[Trainer]:
    """The trainer the architecture's descriptor names (imported only when used: each pulls its
    own engine)."""
    return architecture(arch).trainer_class()


def make_trainer(config: TrainConfig, place: ProcessPlace, data: ArrayDataset) -> Trainer:
    """The architecture's trainer, given only the settings it reads."""
    cls = trainer_class(config.arch)
    return cls(cls.settings_from(config), place, data)

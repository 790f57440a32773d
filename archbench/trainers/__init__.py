"""One trainer per architecture, behind the interface in `archbench.trainers.base`."""

from __future__ import annotations

import importlib

from archbench.config import TrainConfig
from archbench.data import ArrayDataset
from archbench.launch import ProcessPlace
from archbench.trainers.base import Trainer

# architecture -> "module:class", imported only when used (each pulls its own engine)
TRAINERS = {
    "single": "archbench.trainers.single:SingleTrainer",
    "ring": "archbench.trainers.ring:RingTrainer",
    "p2p": "archbench.trainers.p2p:P2PTrainer",
    "ps": "archbench.trainers.ps:PSTrainer",
}


def trainer_class(arch: str) -> type[Trainer]:
    module_name, class_name = TRAINERS[arch].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def make_trainer(config: TrainConfig, place: ProcessPlace, data: ArrayDataset) -> Trainer:
    return trainer_class(config.arch)(config, place, data)

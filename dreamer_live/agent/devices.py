"""The learner's devices: a one-axis mesh that splits each training batch over the devices, with
the parameters and optimizer state replicated on every one (data parallelism; the compiler averages
the gradients). One device is a mesh of one: the same jitted train function either way."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dreamer_live.errors import UserError

AXIS = "batch"


def learner_mesh(config) -> Mesh:
    """The mesh of learner.devices devices (0 = all of the platform's); checks they divide the batch."""
    available = jax.devices()
    wanted = config.learner.devices or len(available)
    if wanted > len(available):
        raise UserError(f"learner.devices {wanted} asks for more devices than JAX sees here: "
                        f"{len(available)} ({available[0].platform})")
    if config.batch_size % wanted:
        raise UserError(f"batch_size {config.batch_size} does not divide over learner.devices "
                        f"{wanted}: use a multiple of {wanted}")
    return Mesh(np.array(available[:wanted]), (AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    """The same full array on every device of `mesh` (parameters, optimizer state, keys, metrics)."""
    return NamedSharding(mesh, PartitionSpec())


def batch_split(mesh: Mesh) -> NamedSharding:
    """Arrays [B, ...] split along B over the devices of `mesh`."""
    return NamedSharding(mesh, PartitionSpec(AXIS))


def describe(mesh: Mesh) -> str:
    """'2 cpu devices' for the log."""
    devices = mesh.devices.ravel()
    return f"{len(devices)} {devices[0].platform} device{'s' if len(devices) > 1 else ''}"

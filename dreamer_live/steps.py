"""The step schema: which keys an observation carries, which the policy reads, which replay stores and
which training uses.

    observation   the game's keys (`vector`, `image`, ...), the FLAG_KEYS, and `log/*` bookkeeping
    policy        the game's keys and is_first (to reset its carry)
    replay        the observation without `log/*`, plus ACTION and the actor's TICK_KEYS
    training      replay without the TICK_KEYS (the reader samples only these)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

FLAG_KEYS = ("reward", "is_first", "is_last", "is_terminal")  # every observation carries these
LOG_PREFIX = "log/"  # env bookkeeping (progress values for the wrappers, metrics): never stored
ACTION = "action"
# When each real-time tick began (wall time, s) and how late (ms): stored, not trained on.
TICK_DTYPES = {"tick_time": np.dtype(np.float64), "tick_late_ms": np.dtype(np.float32)}
TICK_KEYS = tuple(TICK_DTYPES)


# Replay context (agent.replay_context, replay/latents.py): the sampler's id of each step in a batch,
# and the carry the trained steps start from, as train-step inputs.
STEP_ID = "step_id"
CONTEXT_KEYS = ("context/deter", "context/stoch", "context/action")


def is_log(key: str) -> bool:
    """Whether an observation key is env bookkeeping (`log/*`)."""
    return key.startswith(LOG_PREFIX)


def game_keys(keys: Iterable[str]) -> list[str]:
    """The game's own observation keys: no flags, no `log/*`, no action or tick keys."""
    return [k for k in keys if not is_log(k) and k not in FLAG_KEYS + TICK_KEYS + (ACTION,)]


def policy_keys(obs_space) -> list[str]:
    """Observation keys the policy reads: the game's keys plus is_first."""
    return game_keys(obs_space) + ["is_first"]


def replay_keys(obs_space) -> list[str]:
    """Observation keys stored in replay: everything but `log/*` (ACTION and TICK_KEYS are added)."""
    return [k for k in obs_space if not is_log(k)]


def training_keys(obs_keys: Iterable[str]) -> tuple[str, ...]:
    """What a training batch holds: the model's observation keys, the action and the flags."""
    return (*obs_keys, ACTION, *FLAG_KEYS)


def is_trained(key: str) -> bool:
    """Whether a stored replay key is training data (the tick keys are only bookkeeping)."""
    return key not in TICK_KEYS


def tick_fields(tick_time: float, late_ms: float) -> dict:
    """A real-time tick's TICK_KEYS values as replay stores them."""
    return {key: TICK_DTYPES[key].type(value)
            for key, value in zip(TICK_KEYS, (tick_time, late_ms))}


def without_log(obs: dict) -> dict:
    """The observation without its `log/*` keys."""
    return {k: v for k, v in obs.items() if not is_log(k)}

"""Transport seams: where the actor's steps go and its parameters come from, and where the learner's
come from and go (Acme's Adder and VariableSource, and their learner-side twins).

The file transport over a shared logdir is the default: chunk files in DIR/replay and versioned
parameter files in DIR/params. The actor and the learner get their ends only from the four factories
below and use only the methods of the four interfaces. In a process that the Ray launcher started
(dreamer_live/launch/rayrun.py), `use_ray` routes the actor's ends and the learner's publisher
through Ray's object store (dreamer_live/transport/raylink.py); the learner side of Ray persists
every chunk it receives into DIR/replay, so the learner's replay source is the file one either way.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any, Protocol

from dreamer_live.errors import UserError
from dreamer_live.replay import Reader, Writer
from dreamer_live.replay.latents import LatentStore
from dreamer_live.replay.mix import DemoMix, demo_batch


class ReplaySink(Protocol):
    """Actor side of replay: takes one step per tick, never blocking it."""

    def add(self, step: dict) -> None:
        """Queue one step (steps.replay_keys, action and tick keys)."""

    def held(self) -> str:
        """'' while steps reach their store; else what waits in memory and why (a status-line note)."""

    def metrics(self) -> dict:
        """Counts for the actor's metric lines (chunks written, steps shipped), read on the tick."""

    def close(self) -> None:
        """Hand over the partial chunk and stop."""


class VariableSource(Protocol):
    """Actor side of parameters: the newest valid version, read once per tick."""

    @property
    def current(self) -> Any:
        """The parameters in use with their version, learner step and publish time (sync.Loaded)."""

    def lag(self) -> tuple[int, float]:
        """(learner updates, seconds) since the version in use."""

    def learner_silence(self) -> float | None:
        """Seconds since the learner was last heard from; None before it ever was."""

    def close(self) -> None:
        """Stop fetching."""


class ReplaySource(Protocol):
    """Learner side of replay: the newest steps, sampled as training batches."""

    num_steps: int

    def refresh(self) -> int:
        """Take in what the actors added since the last call; return the number of new steps."""

    def steps_written(self) -> int:
        """Env steps the actors had added in all at the last refresh() (the train ratio's denominator),
        beyond those held."""

    def ready(self, length: int | None = None) -> bool:
        """Whether a sequence of `length` steps can be drawn."""

    def sample(self) -> dict:
        """A [batch, length] batch of training keys (steps.training_keys)."""

    def close(self) -> None:
        """Stop background work."""


class VariablePublisher(Protocol):
    """Learner side of parameters: versions for the actors, and a heartbeat while waiting."""

    def publish(self, params: Any, step: int) -> int:
        """Publish a new version of the policy parameters; return its number."""

    def heartbeat(self, step: int) -> None:
        """Say that the learner is alive at `step` without a new version."""


# The learner is heard from at each heartbeat (every run.log_every s while it trains, each second while
# it waits for replay) and each version; an actor reads both every actor.param_interval s.
SILENT_BEATS = 5


def silent_after_s(config) -> float:
    """Seconds without word from the learner after which the actor and `run` say it is silent:
    SILENT_BEATS heartbeats (run.log_every apart) and one poll (actor.param_interval); 26 at the
    defaults."""
    return SILENT_BEATS * config.run.log_every + config.actor.param_interval


def silent_note(silence: float | None, after_s: float) -> str:
    """'learner silent N s' when `silence` (seconds since the learner was last heard from; None or NaN:
    never yet) is over `after_s` (silent_after_s), else ''."""
    if silence is None or not silence > after_s:
        return ""
    return f"learner silent {silence:.0f} s"


_ray: Any = None  # raylink.Link in a Ray actor of the launcher's; None: the file transport


def use_ray(link: Any) -> None:
    """Route this process's transport ends through Ray (a raylink.Link); None: back to files."""
    global _ray
    _ray = link


def replay_sink(config, logdir: pathlib.Path, writer_id: int | str) -> ReplaySink:
    """The actor's replay sink: chunk files in DIR/replay, or (Ray) shipped there from an outbox."""

    if _ray is not None:
        return _ray.replay_sink(config, writer_id)
    return Writer.from_config(config, logdir / "replay", writer_id=writer_id)


def demo_sink(config, logdir: pathlib.Path, writer_id: str) -> ReplaySink:
    """Where recorded human play goes: chunk files in DIR/demos (the replay format)."""

    return Writer.from_config(config, logdir / "demos", writer_id=writer_id)


def variable_source(config, logdir: pathlib.Path, template: Any,
                    on_update: Callable[[Any], None] | None = None) -> VariableSource:
    """The actor's parameter source, started: DIR/params (or, Ray, the object store) polled every
    actor.param_interval s."""
    from dreamer_live.transport import sync  # imports flax, hence JAX

    if _ray is not None:
        return _ray.variable_source(config, template, on_update)
    return sync.Client(logdir / "params", template, sync.model_hash(config),
                       interval=config.actor.param_interval, on_update=on_update).start()


def replay_source(config, replay_dir: pathlib.Path, readonly: bool = False) -> ReplaySource:
    """The learner's replay source: the chunk files of a replay folder, with replay.demo_fraction of
    each batch from the recorded demonstrations beside it (demos/, never modified)."""
    demos_dir = replay_dir.parent / "demos"
    k = demo_batch(config.replay.demo_fraction, config.batch_size)
    if not k or replay_dir.resolve() == demos_dir.resolve():  # no mix, or training on demos alone
        return Reader.from_config(config, replay_dir, readonly=readonly)
    if not demos_dir.is_dir():
        raise UserError(f"replay.demo_fraction {config.replay.demo_fraction:g} needs demonstrations in "
                        f"{demos_dir} (python -m dreamer_live.record)")
    return DemoMix(Reader.from_config(config, replay_dir, readonly, batch=config.batch_size - k),
                   Reader.from_config(config, demos_dir, readonly=True, batch=k))


def latent_store(config):
    """The learner's replay-context latents, keyed by the step ids of replay_source's batches (None
    when agent.replay_context is 0)."""
    return LatentStore.from_config(config)


def variable_publisher(config, logdir: pathlib.Path) -> VariablePublisher:
    """The learner's parameter publisher: versioned files in DIR/params (and, Ray, each version put
    in the object store once)."""
    from dreamer_live.transport import sync  # imports flax, hence JAX

    if _ray is not None:
        return _ray.variable_publisher(config, logdir)
    return sync.Publisher(logdir / "params", sync.model_hash(config))

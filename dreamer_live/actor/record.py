"""Human demonstrations: a person plays while the actor's pipeline records exactly what the actor would.

`python -m dreamer_live.record --logdir DIR --configs PRESET` builds the actor's env (capture, wrappers,
memory values, rewards, episode flags) and runs the actor's tick loop (`actor.TickLoop`, at the actor's
tick rate) with the person in the policy's place: each tick, the keys held on the keyboard are read
from the system (X11 on Linux, pynput on Windows) and mapped onto the game's action table (the
profile's `actions:`, or a built-in game's keys); a combination that no action holds is recorded as the
nearest action (fewest keys different, the table's order breaking ties), counted and reported. No key
is ever sent to the game: the env's key output is read-only while recording, and its reset steps ask
the person to press their keys. F9 pauses and F10 stops, as in the actor; Ctrl-C stops too, and the
partial chunk is written either way.

Steps go to DIR/demos/ in the replay chunk format (writer id `demo<actor.id>`, with spaces.json). The
learner mixes them into its batches at replay.demo_fraction; `learner --offline --replay DIR/demos`
trains from them alone.
"""

from __future__ import annotations

import pathlib
import sys
import threading
import types

import numpy as np

from dreamer_live import cli, spaces as spaceslib, transport
from dreamer_live.actor.core import replay_step
from dreamer_live.actor.loop import EnvFailure, TickLoop, closing
from dreamer_live.envs import is_game, is_realtime, make_env
from dreamer_live.envs.live.keys import XTestKeys, key_name
from dreamer_live.errors import UserError
from dreamer_live.metrics import Logger
from dreamer_live.process import StopFlag
from dreamer_live.steps import replay_keys

DEMOS = "demos"  # DIR/demos: the recorded steps, beside the actor's DIR/replay
# pynput's names for keys whose portable name (keys.py) differs
_PYNPUT_NAMES = {"ctrl_l": "ctrl", "alt_l": "alt", "shift_l": "shift", "alt_gr": "alt_r",
                 "page_up": "pageup", "page_down": "pagedown"}


class X11Keyboard:
    """Keys held on an X display (XQueryKeymap, one round trip per read): what the person holds."""

    def __init__(self, display: str = ""):
        from Xlib import display as xdisplay

        try:
            self._conn = xdisplay.Display(display or None)
        except Exception as e:
            raise UserError(f"cannot open X display {display or '$DISPLAY'!r}: {e}") from None
        self._keys = XTestKeys(self._conn)  # only its pressed(): nothing is ever sent

    def pressed(self, names) -> set[str]:
        """Which of `names` are down now."""
        return self._keys.pressed(names)

    def close(self) -> None:
        """Close the X connection."""
        self._conn.close()


class PynputKeyboard:
    """Keys held on Windows, from pynput's keyboard hook (its listener thread keeps the set)."""

    def __init__(self):
        from pynput import keyboard

        self._down: set[str] = set()
        self._lock = threading.Lock()
        self._listener = keyboard.Listener(on_press=self._on(True), on_release=self._on(False))
        self._listener.start()

    def _on(self, down: bool):
        def handler(key):
            name = getattr(key, "char", None) or getattr(key, "name", None) or ""
            name = key_name(_PYNPUT_NAMES.get(name.lower(), name))
            if name:
                with self._lock:
                    (self._down.add if down else self._down.discard)(name)
        return handler

    def pressed(self, names) -> set[str]:
        """Which of `names` are down now."""
        with self._lock:
            return self._down & set(names)

    def close(self) -> None:
        """Stop the hook."""
        self._listener.stop()


def open_keyboard(display: str = ""):
    """The person's keyboard on this platform (`display`: the X display on Linux)."""
    if sys.platform == "win32":
        return PynputKeyboard()
    return X11Keyboard(display)


def action_table(env) -> list[frozenset[str]]:
    """The keys each action holds, in action order: a live game's profile, or a built-in game's keys."""
    inner = getattr(env, "unwrapped", env)
    if hasattr(inner, "profile"):
        return [frozenset(keys) for _, keys in inner.profile.actions]
    if hasattr(inner, "game"):
        from dreamer_live.envs.games.standalone import keysym
        return [frozenset(key_name(keysym(k)) for k in keys) for keys in inner.game.actions]
    raise UserError("a person can play live games (env.name live) and built-in games in a "
                    "window only")


def nearest_action(held: frozenset[str], table: list[frozenset[str]]) -> tuple[int, bool]:
    """(index, exact): the action holding exactly `held`, else the one with the fewest keys different."""
    distances = [len(held ^ keys) for keys in table]
    index = int(np.argmin(distances))
    return index, distances[index] == 0


class HumanCore:
    """The actor core with the person as the policy: held keys in, the matching action out."""

    def __init__(self, keyboard, table: list[frozenset[str]]):
        self.keyboard, self.table = keyboard, table
        self.names = frozenset().union(*table)
        self.ticks = self.unmatched = 0

    def select_action(self, obs: dict) -> np.ndarray:
        """The action for the keys held now (one-hot, as the agent's)."""
        held = frozenset(self.keyboard.pressed(self.names))
        index, exact = nearest_action(held, self.table)
        self.ticks += 1
        self.unmatched += not exact
        action = np.zeros(len(self.table), np.float32)
        action[index] = 1.0
        return action

    def update(self, params) -> None:
        """No parameters: the person plays."""

    def replay_step(self, obs: dict, action: np.ndarray, tick_time: float | None = None,
                    late_ms: float = 0.0) -> dict:
        """The step as the actor stores it."""
        return replay_step(obs, action, tick_time, late_ms)


class NoParams:
    """The variable source of a run without a policy: version 0 forever, no learner."""

    current = types.SimpleNamespace(version=0, params=None)

    def lag(self) -> tuple[None, None]:
        """No policy, no lag."""
        return None, None

    def learner_silence(self) -> None:
        """No learner is listened to."""
        return None

    def close(self) -> None:
        """Nothing to stop."""


def check_playable(config) -> None:
    """A person needs a game on its own clock and in sight."""
    env = config.env
    if env.name != "live" and not (is_game(env.name) and is_realtime(config)):
        raise UserError(f"a person plays in real time: env.name live or a built-in game with "
                        f"env.clock realtime, not {env.name!r} ({env.clock})")
    if env.name != "live" and not env.window:
        raise UserError("a built-in game needs a window to be played: add --env.window true")


def run_record(config, logdir: pathlib.Path) -> int:
    """Record the person's play until F10, Ctrl-C, actor.steps or actor.duration; always flush."""
    check_playable(config)
    config = config.update({"actor.random_until_params": False})
    stop = StopFlag("record").install()
    logger = Logger(logdir, "record", name=f"record{config.actor.id}", quiet=config.run.quiet)
    opened = []
    with closing(stop, logger, opened) as summary:
        env = make_env(config, inject_keys=False)
        opened.append(env)
        keyboard = open_keyboard(config.env.live.display)
        opened.append(keyboard)
        core = HumanCore(keyboard, action_table(env))
        folder = logdir / DEMOS
        spaceslib.save(folder, {k: env.obs_space[k] for k in replay_keys(env.obs_space)}, env.act_space)
        sink = transport.demo_sink(config, logdir, f"demo{config.actor.id}")
        opened.append(sink)
        logger.message(f"record: play now (no key is sent to the game; F9 pauses, F10 or Ctrl-C stops); "
                       f"writing {folder}, metrics {logdir / 'metrics.jsonl'}")
        loop = TickLoop(config, env, core, NoParams(), sink, logger, watch=None)
        loop.run_until_stopped(stop)
        share = core.unmatched / max(1, core.ticks)
        logger.write(loop.steps, {"record/ticks": core.ticks, "record/unmatched": core.unmatched})
        played = (f"\nrecord: stopped ({stop.reason or 'limit'}) after {loop.steps} steps, "
                  f"{loop.episodes} episodes{loop.bad_obs_note()}; {core.unmatched} ticks "
                  f"({100 * share:.1f}%) held keys no action holds, recorded as the nearest action")
        summary.append(lambda closed: played + (f"; written to {folder}" if closed else ""))
    return 0


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.record --logdir DIR --configs PRESET..."""
    p = cli.parser("dreamer_live.record",
                   "Record a person playing (keys read from the keyboard, never sent) into DIR/demos, "
                   "as the actor would record its own play.")
    args, config = cli.parse(p, argv)
    try:
        return run_record(config, args.logdir)
    except EnvFailure as failure:  # the env's traceback to a file, one line (exit status 1)
        raise failure.report(args.logdir / f"record-{config.actor.id}-error.log",
                             args.logdir / DEMOS) from None


if __name__ == "__main__":
    raise SystemExit(main())

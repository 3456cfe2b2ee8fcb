"""A built-in game as a stand-alone program: a real window, keyboard play, values exported for readers.

`python -m dreamer_live.envs.games.catcher --window` plays Catcher at its fps, scaled up, from the
keyboard (arrows = left/right/up/down, space = jump, letters = themselves; Enter or R restarts after
game over; Esc quits). It is the stand-in for a commercial live game: `--export FILE` writes JSON with
the process id, the window title and the addresses of the values the game writes every frame into one
fixed float64 buffer (readable from another process through /proc/PID/mem), and `--score-log FILE`
appends one JSON line per reward event, for a live-game test to check what it read against.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import signal
import sys
import time

import numpy as np

from dreamer_live import cli
from dreamer_live.atomic import write_atomic
from dreamer_live.envs.games.base import import_pygame, window_scale
from dreamer_live.errors import UserError
from dreamer_live.pacer import CATCH_UP_S, Pacer

# Game key name -> X keysym name (what a live-game backend sends to press that key).
X_KEYSYMS = {"left": "Left", "right": "Right", "up": "Up", "down": "Down", "jump": "space"}
BASE_FIELDS = ("frame", "episode", "game_over", "time")  # exported before the game's own values

_BUFFERS: list[np.ndarray] = []  # export buffers stay alive (and in place) for the process's life


def keysym(name: str) -> str:
    """The X keysym name for a game key name."""
    if name in X_KEYSYMS:
        return X_KEYSYMS[name]
    if len(name) == 1 and name.isalnum():
        return name
    raise UserError(f"no keyboard key for game key {name!r}")


def pygame_keymap(pygame) -> dict[int, str]:
    """pygame key code -> game key name."""
    keymap = {pygame.K_LEFT: "left", pygame.K_RIGHT: "right", pygame.K_UP: "up",
              pygame.K_DOWN: "down", pygame.K_SPACE: "jump"}
    for c in "abcdefghijklmnopqrstuvwxyz0123456789":
        keymap[pygame.key.key_code(c)] = c
    return keymap


class ExportBuffer:
    """A fixed float64 array holding the exported values, at addresses another process can read."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.array = np.zeros(len(names), np.float64)
        _BUFFERS.append(self.array)
        self.index = {name: i for i, name in enumerate(names)}

    def addresses(self) -> dict[str, dict]:
        """name -> {"address": int, "type": "f64"}."""
        base = self.array.ctypes.data
        return {name: {"address": base + 8 * i, "type": "f64"} for i, name in enumerate(self.names)}

    def write(self, values: dict[str, float]) -> None:
        """Store the values (names outside the buffer are ignored)."""
        for name, value in values.items():
            i = self.index.get(name)
            if i is not None:
                self.array[i] = value


def allow_memory_readers() -> None:
    """Let any process of this user read our memory (Yama ptrace_scope 1 allows only ancestors)."""
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_ptracer, ptracer_any = 0x59616D61, ctypes.c_ulong(-1)
        libc.prctl(pr_set_ptracer, ptracer_any, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def read_exported(info: dict) -> dict[str, float]:
    """Read the exported values of a running game (its export JSON) through /proc/PID/mem."""
    out = {}
    with open(f"/proc/{info['pid']}/mem", "rb", buffering=0) as mem:
        for name, where in info["values"].items():
            mem.seek(where["address"])
            out[name] = float(np.frombuffer(mem.read(8), np.float64)[0])
    return out


def module_name(game_cls) -> str:
    """The game's module as imported, also when it runs as __main__ (python -m ...)."""
    module = sys.modules.get(game_cls.__module__)
    spec = getattr(module, "__spec__", None)
    return spec.name if spec is not None else game_cls.__module__


def build_parser(game_cls) -> argparse.ArgumentParser:
    """The stand-alone game's command line."""
    name = game_cls.__name__
    p = argparse.ArgumentParser(
        prog=f"python -m {module_name(game_cls)}",
        description=f"Play {name} at {game_cls.fps} fps. Keys: arrows = left/right/up/down, space = "
                    f"jump, letters = themselves; Enter or R restarts after game over; Esc quits.")
    p.add_argument("--window", action="store_true",
                   help="open a real window played from the keyboard (default: headless, no input)")
    p.add_argument("--scale", type=int, default=None,
                   help="window pixels per game pixel (default: about 256 pixels on the longer side)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    p.add_argument("--title", default=f"dreamer_live {name}", help="window title")
    p.add_argument("--export", type=pathlib.Path, metavar="FILE",
                   help="write JSON with the pid, title and addresses of the exported values")
    p.add_argument("--score-log", type=pathlib.Path, metavar="FILE",
                   help="append one JSON line per reward event (frame, time, reward, score)")
    p.add_argument("--auto-restart", type=float, default=-1.0, metavar="SECONDS",
                   help="restart this many seconds after game over (default: wait for Enter/R)")
    p.add_argument("--duration", type=float, default=0.0,
                   help="quit after this many seconds (default 0 = run until closed)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="game option, e.g. --option init_lives=5 (numbers are parsed)")
    return p


def _options(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--option wants KEY=VALUE, not {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _run(game_cls, argv: list[str] | None) -> int:
    args = build_parser(game_cls).parse_args(argv)
    if args.scale is not None and args.scale < 1:
        raise UserError(f"--scale must be >= 1, not {args.scale}")
    # X11 class to find the window by (xdotool search --name misses SDL's UTF8_STRING titles).
    wm_class = f"dreamer_live_{game_cls.__name__.lower()}"
    os.environ["SDL_VIDEO_X11_WMCLASS"] = wm_class
    pygame = import_pygame(args.window)

    game = game_cls(seed=args.seed, **_options(args.option))
    scale = args.scale or window_scale(game)
    for keys in game.actions:
        for key in keys:
            keysym(key)  # every game key must be playable
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
    pygame.display.init()
    try:
        screen = pygame.display.set_mode((game.width * scale, game.height * scale))
        pygame.display.set_caption(args.title)
        surface = pygame.Surface((game.width, game.height))
        buffer = ExportBuffer(BASE_FIELDS + tuple(n for n in game.exported if n not in BASE_FIELDS))
        start = time.time()
        episode = 0
        buffer.write({"frame": 0, "episode": 0, "game_over": 0, "time": start, **game.exported})
        if args.export:
            allow_memory_readers()
            info = {"pid": os.getpid(), "title": args.title, "wm_class": wm_class,
                    "game": game.name, "fps": game.fps,
                    "size": [game.width, game.height], "scale": scale, "window": args.window,
                    "values": buffer.addresses(),
                    "keys": {k: keysym(k) for keys in game.actions for k in keys},
                    "actions": [list(keys) for keys in game.actions], "restart_key": "Return"}
            write_atomic(args.export, json.dumps(info, indent=1).encode())
            print(f"{game.name}: exported value addresses to {args.export}", flush=True)
        log = None
        if args.score_log:
            args.score_log.parent.mkdir(parents=True, exist_ok=True)
            log = open(args.score_log, "a")
            print(f"{game.name}: logging reward events to {args.score_log}", flush=True)
        keymap = pygame_keymap(pygame)
        held: set[str] = set()
        pacer = Pacer(game.fps, spin_s=0.0, catch_up_s=CATCH_UP_S)
        over_since = None
        print(f"{game.name}: playing at {game.fps} fps (window: {args.window}); Esc quits", flush=True)
        while not stop:
            now = time.monotonic()
            if args.duration and time.time() - start >= args.duration:
                break
            for event in pygame.event.get():
                if event.type == pygame.QUIT:
                    stop.append("closed")
                elif event.type == pygame.KEYDOWN:
                    if event.key == pygame.K_ESCAPE:
                        stop.append("Esc")
                    elif game.game_over and event.key in (pygame.K_RETURN, pygame.K_r):
                        over_since = -1.0  # restart below
                    if event.key in keymap:
                        held.add(keymap[event.key])
                elif event.type == pygame.KEYUP and event.key in keymap:
                    held.discard(keymap[event.key])
                elif event.type == getattr(pygame, "WINDOWFOCUSLOST", -1):
                    held.clear()  # keys are released when the window loses focus
            if game.game_over:
                if over_since is None:
                    over_since = now
                    print(f"{game.name}: episode {episode} over, score {game.score:g}, "
                          f"{game.frame} frames", flush=True)
                restart = over_since < 0 or (args.auto_restart >= 0
                                             and now - over_since >= args.auto_restart)
                if restart:
                    game.reset()
                    episode += 1
                    over_since = None
            else:
                reward = game.tick(frozenset(held))
                if reward and log is not None:
                    log.write(json.dumps({"frame": game.frame, "time": time.time(), "reward": reward,
                                          "score": game.score, "episode": episode,
                                          "game_over": game.game_over}) + "\n")
                    log.flush()
            buffer.write({"frame": game.frame, "episode": episode, "game_over": float(game.game_over),
                          "time": time.time(), **game.exported})
            game.draw(surface)
            pygame.transform.scale(surface, screen.get_size(), screen)
            pygame.display.flip()
            pacer.wait()
        print(f"{game.name}: stopped ({stop[0] if stop else 'duration'}), score {game.score:g}",
              flush=True)
        if log is not None:
            log.close()
    finally:
        pygame.display.quit()
    return 0


def main(game_cls, argv: list[str] | None = None) -> int:
    """Run `game_cls` stand-alone with the command line `argv`."""
    def run(argv):
        return _run(game_cls, argv)

    run.__module__ = module_name(game_cls)  # errors print as "<game module>: error: ..."
    return cli.main(run)(argv)

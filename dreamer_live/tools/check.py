"""Check a game's set-up before a long run: play it for a few seconds through the actor's env and
print every reward, every episode end and what the memory values did.

    python -m dreamer_live.check --configs PRESET [--seconds 20] [--watch] [--section.key value ...]

The env is the one the actor would build (profile, capture, memory values, rewards, wrappers, episode
flags), ticking at the actor's rate. It holds uniformly random actions, or with --watch sends no key at
all while a person plays (the reset steps then ask for the keys). Nothing is written: no logdir, no
replay. Each tick with a reward prints the values that changed; each episode end says whether it was a
death (is_terminal) or a cut (a time cap, stagnation, a lost window, the game leaving play); the last
line sums it up with each memory value's range.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from dreamer_live import cli
from dreamer_live.actor.core import random_action
from dreamer_live.envs import make_env, tick_hz
from dreamer_live.errors import UserError
from dreamer_live.pacer import Pacer
from dreamer_live.steps import LOG_PREFIX


class Tally:
    """What the check saw: steps, episodes and how they ended, rewards, each value's range."""

    def __init__(self):
        self.steps = self.episodes = self.deaths = self.cuts = 0
        self.gained = self.lost = 0.0
        self.ranges: dict[str, list[float]] = {}
        self.ep_return, self.ep_steps = 0.0, 0

    def values(self, obs) -> dict[str, float]:
        """The memory values (log/ keys) of an observation, noted in their ranges."""
        found = {k[len(LOG_PREFIX):]: float(v) for k, v in obs.items() if k.startswith(LOG_PREFIX)}
        for name, value in found.items():
            low_high = self.ranges.setdefault(name, [value, value])
            low_high[0], low_high[1] = min(low_high[0], value), max(low_high[1], value)
        return found

    def summary(self, seconds: float, late: int) -> str:
        """The closing line."""
        ranges = ", ".join(f"{n} {lo:g}..{hi:g}" for n, (lo, hi) in self.ranges.items())
        return (f"check: {self.steps} steps in {seconds:.1f} s ({self.steps / max(seconds, 1e-9):.1f} "
                f"ticks/s, {late} late), episode ends: {self.deaths} deaths, {self.cuts} cut; rewards {self.gained:+.3f} / {self.lost:+.3f}"
                + (f"; values: {ranges}" if ranges else ""))


def play(env, seconds: float, hz: float, rng, watch: bool, out=sys.stdout) -> Tally:
    """Tick the env for `seconds` (resets included), printing rewards and episode ends; the Tally."""
    tally, pacer = Tally(), Pacer(hz)
    began = time.monotonic()

    def say(text: str) -> None:
        print(f"{time.monotonic() - began:8.2f} s  step {tally.steps:>6}  {text}", file=out, flush=True)

    obs = env.reset()
    before = tally.values(obs)
    pacer.start()
    while time.monotonic() - began < seconds:
        if obs["is_last"]:
            tally.episodes += 1
            death = bool(obs["is_terminal"])
            tally.deaths += death
            tally.cuts += not death
            say(f"episode ended: {'death (is_terminal)' if death else 'cut (is_last only)'}, return "
                f"{tally.ep_return:+.3f} over {tally.ep_steps} steps")
            start = time.monotonic()
            obs = env.reset()
            before = tally.values(obs)
            tally.ep_return, tally.ep_steps = 0.0, 0
            say(f"reset ({time.monotonic() - start:.1f} s)")
            pacer.restart()
            continue
        if not watch:
            env.act(random_action(env.act_space, rng))
        pacer.wait()
        obs = env.observe()
        tally.steps += 1
        tally.ep_steps += 1
        now = tally.values(obs)
        reward = float(obs["reward"])
        if reward:
            tally.ep_return += reward
            if reward > 0:
                tally.gained += reward
            else:
                tally.lost += reward
            changed = "  ".join(f"{n} {before.get(n, float('nan')):g} -> {v:g}" for n, v in now.items()
                                if v != before.get(n))
            say(f"reward {reward:+.3f}" + (f"   {changed}" if changed else ""))
        before = now
    print(tally.summary(time.monotonic() - began, pacer.late), file=out, flush=True)
    return tally


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Command line: python -m dreamer_live.check --configs PRESET [--seconds S] [--watch]."""
    p = cli.parser("dreamer_live.check", __doc__.splitlines()[0] + " " + __doc__.splitlines()[1],
                   logdir_required=False)
    p.add_argument("--seconds", type=float, default=20.0, help="how long to play (default 20)")
    p.add_argument("--watch", action="store_true",
                   help="send no keys: a person plays, the check only reads (live games)")
    args, config = cli.parse(p, argv, write=False)
    if args.seconds <= 0:
        raise UserError(f"--seconds must be positive, got {args.seconds:g}")
    env = make_env(config, inject_keys=not args.watch)
    try:
        play(env, args.seconds, tick_hz(config), np.random.default_rng(config.seed), args.watch)
    except KeyboardInterrupt as e:
        print(f"check: stopped ({cli.stop_signal(e)})", flush=True)
    finally:
        env.close()
    return 0

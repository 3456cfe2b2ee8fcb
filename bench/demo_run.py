"""The default demo, measured: run `python -m dreamer_live.run` for N minutes and summarize it.

    python bench/demo_run.py --minutes 20 [--logdir DIR] [-- extra run.py arguments]
    python bench/demo_run.py --summarize DIR          # figures of an existing run
    python bench/demo_run.py --smoke                  # 18 s of the debug preset, 2 scripted episodes

Prints the actor's tick rate and lateness, the learner's updates/s and train ratio, and the episode
return over time: the mean of the first 10 episodes against the last 10 (a ratio is meaningless for
returns that cross zero, so the difference is printed), and the first time the 10-episode moving
average rose by RISE above the first 10 episodes' mean ("visibly rising") and first reached REACH
(in minutes and in the learner's updates by then). For Catcher (state or pixels) it also plays the
same episodes (same tick rate and time cap, lockstep) with scripted players that read the state, for
scale: uniformly random keys, always left, and a greedy player that steers the paddle under the fruit.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from cadence import stop  # noqa: E402
from smoke import add_smoke, smoke_dir  # noqa: E402

from dreamer_live.metrics import read_lines  # noqa: E402

RISE = 1.0  # return units (Catcher: fruits) above the first episodes' mean that count as "rising"
WINDOW = 10  # episodes per moving average
REACH = 20.0  # a 10-episode average this high counts as "reached" (Catcher's greedy player: 24.5)


def summarize(logdir: pathlib.Path) -> dict:
    """Figures of one run from its metrics.jsonl."""
    records = read_lines(logdir / "metrics.jsonl")
    if not records:
        raise SystemExit(f"no metrics in {logdir}")
    t0 = records[0]["time"]
    ticks = [r for r in records if r["source"] == "actor" and "actor/ticks_per_s" in r]
    learn = [r for r in records if r["source"] == "learner" and "learner/updates_per_s" in r]
    episodes = [(r["time"] - t0, r["episode/return"]) for r in records if "episode/return" in r]
    out = {"minutes": (records[-1]["time"] - t0) / 60}
    if ticks:
        out["ticks_per_s"] = float(np.mean([r["actor/ticks_per_s"] for r in ticks]))
        out["steps"] = ticks[-1]["step"]
        out["late_ticks"] = ticks[-1]["actor/late_ticks"]
        out["late_fraction"] = out["late_ticks"] / max(1, out["steps"])
        out["late_ms_p99_median"] = float(np.median([r["actor/late_ms_p99"] for r in ticks]))
        out["late_ms_max"] = float(max(r["actor/late_ms_max"] for r in ticks))
    if learn:
        out["updates"] = learn[-1]["step"]
        busy = [r["learner/updates_per_s"] for r in learn if r["learner/updates_per_s"]]
        out["updates_per_s"] = float(np.mean(busy)) if busy else 0.0
        out["train_ratio"] = learn[-1]["learner/train_ratio"]
    if len(episodes) >= 2 * WINDOW:
        returns = np.array([e[1] for e in episodes])
        first, last = returns[:WINDOW].mean(), returns[-WINDOW:].mean()
        out.update(episodes=len(episodes), return_first=float(first), return_last=float(last))
        moving = np.convolve(returns, np.ones(WINDOW) / WINDOW, mode="valid")

        def updates_at(seconds: float) -> int:  # the learner's updates by then (its last line)
            return max((r["step"] for r in learn if r["time"] - t0 <= seconds), default=0)

        rising = np.nonzero(moving[WINDOW:] >= first + RISE)[0]
        if rising.size:
            index = rising[0] + 2 * WINDOW - 1  # the episode that completes the window
            out["rising_after_min"] = episodes[index][0] / 60
            out["rising_after_updates"] = updates_at(episodes[index][0])
        reached = np.nonzero(moving >= REACH)[0]
        if reached.size:
            when = episodes[reached[0] + WINDOW - 1][0]
            out[f"reached_{REACH:g}_after_min"] = when / 60
            out[f"reached_{REACH:g}_after_updates"] = updates_at(when)
    return out


def scripted_returns(logdir: pathlib.Path, episodes: int) -> dict:
    """Mean episode return of scripted Catcher players under the run's config (empty for other games)."""
    from dreamer_live import config as configlib
    from dreamer_live.envs import lockstep_twin, make_env
    from dreamer_live.envs.games.players import PLAYERS, play_episodes

    config = configlib.defaults().update(configlib.read_yaml(logdir / "config.yaml") or {})
    game = config.env
    if (game.name, game.clock) != ("dreamer_live/Catcher-v0", "realtime"):
        return {}
    if not (game.time_cap_s or game.time_cap_steps):  # the greedy player never loses: no episode end
        print("scripted players skipped: the run's episodes had no time cap (env.time_cap_s)")
        return {}
    env = make_env(lockstep_twin(config))
    players = {"random": "random", "always left": lambda game: 1, "greedy": PLAYERS["Catcher"]}
    out = {f"scripted {name}": float(np.mean(play_episodes(env, player, episodes)))
           for name, player in players.items()}
    env.close()
    return out


def report(figures: dict) -> None:
    """Print the figures, one per line."""
    for key, value in figures.items():
        print(f"{key:>20}: {value:.3f}" if isinstance(value, float) else f"{key:>20}: {value}")
    if "return_first" in figures:
        print(f"{'return change':>20}: {figures['return_last'] - figures['return_first']:+.2f} "
              f"(last {WINDOW} episodes minus first {WINDOW})")
    if "rising_after_min" not in figures and "episodes" in figures:
        print(f"{'rising':>20}: the {WINDOW}-episode average never rose by {RISE} in this run")


def main() -> int:
    """Run the demo for --minutes (or summarize --summarize DIR) and print its figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--logdir", type=pathlib.Path, default=None)
    p.add_argument("--summarize", type=pathlib.Path, default=None, metavar="DIR")
    p.add_argument("--player-episodes", type=int, default=30, help="episodes of each scripted player")
    add_smoke(p)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for dreamer_live.run after --")
    args = p.parse_args()
    if args.summarize:
        report({**summarize(args.summarize), **scripted_returns(args.summarize, args.player_episodes)})
        return 0
    rest = [a for a in args.rest if a != "--"]
    if args.smoke:  # presets given after -- still win
        args.minutes, args.player_episodes = 0.3, 2
        args.logdir, rest = smoke_dir("demo_run") / "run", ["--configs", "catcher", "debug", *rest]
    logdir = args.logdir or REPO / "logdir" / f"bench-demo-{time.strftime('%Y%m%d-%H%M%S')}"
    cmd = [sys.executable, "-m", "dreamer_live.run", "--logdir", str(logdir),
           "--run.quiet", "true", *rest]
    print("running", " ".join(cmd), f"for {args.minutes} min", flush=True)
    proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ))
    code = stop(proc, 180, after=args.minutes * 60)
    report({**summarize(logdir), **scripted_returns(logdir, args.player_episodes)})
    if code:
        print(f"dreamer_live.run exited with status {code}")
    return 1 if code else 0


if __name__ == "__main__":
    raise SystemExit(main())

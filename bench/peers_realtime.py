"""The same real-time game, the same minutes: this project against synchronous trainers, side by side.

    .venv/bin/python bench/peers_realtime.py [--trainers ours sync rllib_ppo rllib_ppo_small rllib_dreamerv3
                                              sheeprl_dreamerv3]
                                             [--obs vector|image] [--minutes 15 30] [--seeds 0]
                                             # runs what the data lacks
    .venv/bin/python bench/peers_realtime.py --table    # the table from the data alone
    .venv/bin/python bench/peers_realtime.py --smoke    # 40 s each: this project's debug agent, and the
                                                        # small PPO and sheeprl where installed

Every trainer plays real-time Catcher from its state (--obs vector) or its frames (--obs image) through
one gymnasium env, bench/peers/realtime_game.py, which keeps the game's clock and time cap and measures,
itself, how long the game got no key. One trainer at a time (the game is one per machine, and a second
trainer would take its cores), for the longest of --minutes from its launch, then stopped as a user would
(Ctrl-C).
Trainers, each with its own standard loop and its own frame size (the game's frame is 64x64 RGB):
- ours: `dreamer_live.run --configs catcher` (catcher_pixels from frames: 16x16 grey), the actor and the
  learner as processes;
- sync: bench/sync_trainer.py, this project's agent in the collect-then-train loop;
- rllib_ppo / rllib_ppo_small / rllib_dreamerv3: RLlib's PPO with PPOConfig's defaults, a PPO that
  pauses less, and RLlib's DreamerV3 with DreamerV3Config's defaults (bench/peers/rllib_trainer.py),
  from the RLlib peer's environment (bench/peers.py --install rllib); frames 64x64 RGB;
- sheeprl_dreamerv3: sheeprl's DreamerV3 in its own loop, its smallest model (bench/peers/sheeprl_trainer.py),
  from the sheeprl peer's environment (bench/peers.py --install sheeprl); frames 64x64 RGB.
A peer's trainer is SKIPPED when its environment is not installed.

Printed per run and minute mark: the mean return of the last WINDOW episodes ended by then, the
game-idle share (idle seconds over the seconds since the game's first input), the longest gap between
two inputs, the stalls (gaps of two step periods or more: a tick the game played with no key; "-" for
runs measured before the game counted them), and when the first key came. The data file (--data) keeps
each finished run as it ends; a run cut short starts over.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np

BENCH = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "peers"))

from cadence import stop  # noqa: E402
from games_table import commit, machine, run_key, split_key  # noqa: E402
from peers import peer_python  # noqa: E402
from realtime_game import HEARTBEAT_S, HZ  # noqa: E402
from smoke import SKIPPED, add_smoke, smoke_dir  # noqa: E402

from dreamer_live.atomic import write_atomic  # noqa: E402

ROOT = BENCH.parent
TRAINERS = ("ours", "sync", "rllib_ppo", "rllib_ppo_small", "rllib_dreamerv3", "sheeprl_dreamerv3")
OBS = ("vector", "image")
RLLIB = "rllib_"  # a trainer named rllib_SETTING runs bench/peers/rllib_trainer.py --setting SETTING
WINDOW = 10  # episodes in a mark's mean return (Catcher's episodes end at 30 s: about 5 minutes)
DEFAULT_DATA = BENCH / "peers_realtime.json"
GAME = "realtime_game:Metered-v0"
GAME_LOG = "game.jsonl"  # in each run's logdir: the metered game's lines


def peer_of(trainer: str) -> str | None:
    """The peer whose environment runs `trainer` (None: this project's)."""
    return "rllib" if trainer.startswith(RLLIB) else "sheeprl" if trainer.startswith("sheeprl_") else None


def command(trainer: str, obs: str, seed: int, logdir: pathlib.Path, seconds: float, smoke: bool) -> list[str]:
    """The trainer's command line, playing the metered game into logdir/GAME_LOG."""
    log = str(logdir / GAME_LOG)
    peer = peer_of(trainer)
    if peer == "rllib":
        return [str(peer_python(peer)), str(BENCH / "peers" / "rllib_trainer.py"), "--log", log,
                "--seconds", str(seconds), "--setting", trainer[len(RLLIB):], "--obs", obs, "--seed", str(seed)]
    if peer == "sheeprl":
        return [str(peer_python(peer)), str(BENCH / "peers" / "sheeprl_trainer.py"), "--log", log,
                "--obs", obs, "--seed", str(seed), *(["--smoke"] if smoke else [])]
    preset = "catcher_pixels" if obs == "image" else "catcher"
    game = ["--configs", preset, *(["debug"] if smoke else []), "--env.name", GAME,
            "--env.time_cap_s", "0", "--env.kwargs", json.dumps({"log": log, "obs": obs}),
            "--seed", str(seed), "--logdir", str(logdir)]
    if trainer == "ours":
        return [sys.executable, "-m", "dreamer_live.run", *game, "--run.quiet", "true"]
    return [sys.executable, str(BENCH / "sync_trainer.py"), *game, "--seconds", str(seconds)]


def run_one(trainer: str, obs: str, seed: int, seconds: float, logdir: pathlib.Path, smoke: bool) -> dict:
    """Launch one trainer, stop it `seconds` after launch, and return its game's record."""
    shutil.rmtree(logdir, ignore_errors=True)  # a run cut short, or one the data no longer holds: anew
    logdir.mkdir(parents=True)
    game_log = logdir / GAME_LOG
    cmd = command(trainer, obs, seed, logdir, seconds, smoke)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH / "peers"), str(ROOT)])}
    with open(logdir / "trainer.log", "w") as out:
        launched = time.time()
        # Its own process group, stopped as a terminal's Ctrl-C stops it: RLlib's workers with it.
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        code = stop(proc, 60, after=seconds, group=True)
        ended = time.time()
    lines = [json.loads(line) for line in game_log.read_text().splitlines() if line] if game_log.exists() else []
    if not lines:
        raise RuntimeError(f"{trainer} never played (exit {code}); see {logdir / 'trainer.log'}")
    return {"seconds": seconds, "exit": code,
            "stopped_at_s": round(ended - launched, 1),
            "episodes": [[round(x["time"] - launched, 1), x["return"]] for x in lines if "return" in x],
            "meter": [[round(x["time"] - launched, 1), x["idle_s"], x["longest_gap_s"], x["stalls"]]
                      for x in lines],
            "command": " ".join(cmd[1:])}


def idle_until(record: dict, mark_s: float) -> tuple[float, float, int | None]:
    """(idle seconds, longest input gap, stalls) from the game's first key to `mark_s` after launch
    (stalls None for a run measured before the game counted them). The time between the game's last
    line and the mark counts as idle beyond a heartbeat and a step period (a game in play writes a line
    at least that often): a trainer paused there sent no key, one stall more."""
    meter = [m for m in record["meter"] if m[0] <= mark_s]
    if not meter:
        return 0.0, 0.0, 0
    t, idle, longest, *stalls = meter[-1]
    stalls = stalls[0] if stalls else None
    quiet = min(mark_s, record["stopped_at_s"]) - t
    trailing = max(0.0, quiet - HEARTBEAT_S - 1.0 / HZ)
    if trailing and stalls is not None:
        stalls += 1
    return idle + trailing, max(longest, quiet - HEARTBEAT_S if trailing else 0.0), stalls


def at_mark(record: dict, mark_s: float) -> dict:
    """A run's figures `mark_s` seconds after launch."""
    first = record["meter"][0][0]
    if mark_s < first:
        return {}
    idle, longest, stalls = idle_until(record, mark_s)
    returns = [r for t_end, r in record["episodes"] if t_end <= mark_s]
    return {"return": float(np.mean(returns[-WINDOW:])) if returns else None, "episodes": len(returns),
            "idle_share": idle / max(1e-9, mark_s - first), "longest_gap_s": longest, "stalls": stalls,
            "first_key_s": first}


def draw(data: dict, keys: list[str], path: pathlib.Path) -> None:
    """Return (the mean of the last WINDOW episodes) and the idle share of each minute, against the
    minutes since each trainer's launch: one row of panels per observation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [o for o in OBS if any(split_key(k)[1] == o for k in keys)] or [OBS[0]]
    fig, axes = plt.subplots(len(rows), 2, figsize=(12, 4.2 * len(rows)), squeeze=False)
    for (ax1, ax2), obs in zip(axes, rows):
        for key in (k for k in keys if split_key(k)[1] == obs):
            record = data["runs"].get(key)
            if record is None or not record["episodes"]:
                continue
            ends, returns = np.array(record["episodes"], dtype=float).T
            means = [returns[max(0, i + 1 - WINDOW):i + 1].mean() for i in range(len(returns))]
            line, = ax1.plot(ends / 60.0, means, label=key)
            minutes = np.arange(int(record["stopped_at_s"] // 60) + 1)
            idle = np.array([idle_until(record, 60.0 * m)[0] for m in minutes])
            ax2.plot(minutes[1:] - 0.5, 100 * np.diff(idle) / 60.0, marker="o", color=line.get_color(),
                     label=key)
        ax1.set(xlabel="minutes since launch", ylabel=f"return, mean of the last {WINDOW} episodes",
                title=f"real-time Catcher ({obs}): return against wall-clock time")
        ax2.set(xlabel="minutes since launch", ylabel="% of the minute with no key",
                title=f"game-idle share ({obs})")
        ax1.legend(fontsize=8)
        ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def load(path: pathlib.Path) -> dict:
    """The data file, or an empty one."""
    return json.loads(path.read_text()) if path.exists() else {"window": WINDOW, "runs": {}}


def print_table(data: dict, keys: list[str], marks: list[float]) -> None:
    """One line per run and minute mark."""
    print(f"{'run':<28} {'min':>4} {'return':>7} {'episodes':>8} {'idle share':>10} {'longest gap':>11} "
          f"{'stalls':>6} {'first key':>9}")
    for key in keys:
        record = data["runs"].get(key)
        if record is None:
            print(f"{key:<28} not run")
            continue
        for minutes in marks:
            got = at_mark(record, minutes * 60)
            if not got or minutes * 60 > record["stopped_at_s"] + 1:
                continue
            ret = "-" if got["return"] is None else f"{got['return']:.2f}"
            stalls = "-" if got["stalls"] is None else got["stalls"]
            print(f"{key:<28} {minutes:>4g} {ret:>7} {got['episodes']:>8} {got['idle_share']:>10.2%} "
                  f"{got['longest_gap_s']:>10.1f}s {stalls:>6} {got['first_key_s']:>8.1f}s")


def main(argv=None) -> int:
    """Run the trainers the data lacks, one at a time, and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    p.add_argument("--obs", default="vector", choices=OBS, help="the game's observation")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--minutes", type=float, nargs="+", default=[15.0, 30.0], help="marks; runs last the longest")
    p.add_argument("--data", type=pathlib.Path, default=DEFAULT_DATA)
    p.add_argument("--logs", type=pathlib.Path, default=ROOT / "logdir" / "peers_realtime")
    p.add_argument("--figure", type=pathlib.Path, default=BENCH / "figures" / "peers_realtime.png")
    p.add_argument("--table", action="store_true", help="print the table from the data alone")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:
        scratch = smoke_dir("peers_realtime")
        args.minutes, args.data, args.logs = [0.35, 0.7], scratch / "data.json", scratch / "logs"
        args.figure = scratch / "peers_realtime.png"
        args.seeds = [0]
        args.trainers = [t for t in args.trainers if t in ("ours", "rllib_ppo_small", "sheeprl_dreamerv3")]
    data = load(args.data)
    keys = [run_key(t, args.obs, s) for t in args.trainers for s in args.seeds]
    if not args.table:
        for trainer in args.trainers:
            peer = peer_of(trainer)
            if peer and not peer_python(peer).exists():
                print(f"{SKIPPED}{trainer}: the {peer} peer is not installed (bench/peers.py --install {peer})")
                continue
            for seed in args.seeds:
                key = run_key(trainer, args.obs, seed)
                if key in data["runs"]:
                    continue
                seconds = max(args.minutes) * 60
                logdir = args.logs / f"{trainer}-{args.obs}-seed{seed}"
                print(f"running {key} for {seconds / 60:g} min (logs in {logdir})", flush=True)
                record = run_one(trainer, args.obs, seed, seconds, logdir, args.smoke)
                record.update(machine=machine(), date=datetime.date.today().isoformat(), commit=commit())
                data = load(args.data)
                data["runs"][key] = record
                write_atomic(args.data, (json.dumps(data, indent=1) + "\n").encode())
                print(f"finished {key}: {len(record['episodes'])} episodes, exit {record['exit']}", flush=True)
    print_table(data, keys, args.minutes)
    # the figure is the data file's, whichever trainers this call ran: every run it holds
    held = sorted(data["runs"], key=lambda k: (OBS.index(split_key(k)[1]), TRAINERS.index(split_key(k)[0]), k))
    draw(data, held, args.figure)
    print(f"figure: {args.figure}")
    return 0


if __name__ == "__main__":
    from dreamer_live import cli
    raise SystemExit(cli.main(main)(sys.argv[1:]))

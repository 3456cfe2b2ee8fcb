"""Decoupled dreamer_live against the same agent trained synchronously on the real-time Catcher, same clock.

    .venv/bin/python bench/realtime_learning.py --minutes 20 [--preset catcher] [--out DIR]
    .venv/bin/python bench/realtime_learning.py --smoke      # 12 s per run, debug preset, collect 64

Runs, one after the other (never side by side: they would share the CPU):
  decoupled  python -m dreamer_live.run --configs PRESET --actor.duration MINUTES*60: the actor plays at
             actor.hz while the learner trains from replay in its own process (the learner's compile
             and prefill run inside the budget while the actor already plays)
  sync       bench/sync_trainer.py --configs PRESET --seconds MINUTES*60: collect N steps, then train
             M = run.train_ratio * N / batch steps updates in the same process (no input meanwhile; its
             train step is compiled before its game clock starts)
Both play the same game with the same agent config, policy code, replay store and train step, for the
same game time. Prints per run: episodes, mean return of the first and last quarter of the time, game
overs that came right after a pause in input (the game ended while nobody was playing: "cut short"),
a lower bound on the lives lost in pauses (net negative reward of the first tick after each pause),
the fraction of game time with the keys released (no action for the game's release_after), updates.
Writes OUT/realtime_learning.png (return against wall-clock time, and the share of each minute with no
input) and OUT/realtime_learning.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cadence  # noqa: E402
from smoke import add_smoke, smoke_dir  # noqa: E402

from dreamer_live.metrics import read_lines  # noqa: E402

RUNS = ("decoupled", "sync")
WRITER = {"decoupled": "0", "sync": "sync"}


def run_decoupled(logdir: pathlib.Path, presets: list[str], seconds: float) -> None:
    """The project's launcher: learner + actor processes for `seconds` of actor time."""
    cmd = [sys.executable, "-m", "dreamer_live.run", "--logdir", str(logdir), "--configs", *presets,
           "--actor.duration", str(seconds), "--run.quiet", "true"]
    proc = cadence.start(cmd, logdir.parent / f"{logdir.name}.log")
    cadence.wait_ok(proc, seconds + 900, "dreamer_live.run", logdir.parent / f"{logdir.name}.log")


def run_sync(logdir: pathlib.Path, presets: list[str], seconds: float, collect: int) -> None:
    """The synchronous baseline for `seconds` of game time."""
    cmd = [sys.executable, str(ROOT / "bench" / "sync_trainer.py"), "--logdir", str(logdir), "--configs",
           *presets, "--seconds", str(seconds), "--collect", str(collect), "--run.quiet", "true"]
    proc = cadence.start(cmd, logdir.parent / f"{logdir.name}.log")
    cadence.wait_ok(proc, seconds + 900, "sync trainer", logdir.parent / f"{logdir.name}.log")


def analyse(name: str, logdir: pathlib.Path, hz: float) -> dict:
    """Episodes, returns over time, pauses and updates of one run."""
    ticks = cadence.read_ticks(logdir / "replay", WRITER[name])
    t0 = float(ticks["tick_time"][0])
    stats = cadence.tick_stats(ticks, hz, cadence.release_after())
    records = read_lines(logdir / "metrics.jsonl")
    episodes = [(r["time"] - t0, r["episode/return"]) for r in records
                if r.get("source") == "actor" and r.get("episode/return") is not None and r["time"] >= t0]
    if name == "decoupled":
        updates = max((r["step"] for r in records if r.get("source") == "learner"), default=0)
    else:
        updates = max((r.get("sync/updates", 0) for r in records), default=0)
    total = stats["seconds"]
    times = np.array([e[0] for e in episodes])
    returns = np.array([e[1] for e in episodes])

    def mean_in(a, b):
        sel = returns[(times >= a * total) & (times < b * total + 1e-9)]
        return float(sel.mean()) if len(sel) else float("nan")

    is_last = ticks["is_last"].astype(bool)
    terminal = ticks["is_terminal"].astype(bool)
    # Per-minute share of game time with keys released: gap beyond release_after, binned by the gap's end.
    gaps = np.diff(ticks["tick_time"])
    released = np.clip(gaps - cadence.release_after(), 0, None)
    minute = ((ticks["tick_time"][1:] - t0) // 60).astype(int)
    bins = int(total // 60) + (total % 60 >= 10)  # a last partial minute only if it has >= 10 s
    per_minute = [float(released[minute == m].sum() / min(60.0, total - 60.0 * m)) for m in range(bins)]
    return {"name": name, "seconds": total, "steps": stats["ticks"], "updates": int(updates),
            "episodes": len(episodes), "game_overs": int(terminal.sum()),
            "time_capped": int((is_last & ~terminal).sum()),
            "cut_short": stats["gameovers_in_pauses"], "misses_in_pauses": stats["misses_in_pauses"],
            "pauses": stats["pauses"], "released_frac": stats["released_frac"],
            "max_gap_s": stats["max_gap_s"], "return_first_quarter": mean_in(0.0, 0.25),
            "return_last_quarter": mean_in(0.75, 1.0),
            "return_mean": float(returns.mean()) if len(returns) else float("nan"),
            "curve": [[float(a), float(b)] for a, b in episodes], "released_per_minute": per_minute}


def plot(results: list[dict], path: pathlib.Path, title: str) -> None:
    """Return against wall-clock minutes (dots + running mean) and no-input share per minute."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
    for r, colour in zip(results, ("tab:blue", "tab:red")):
        curve = np.array(r["curve"]).reshape(-1, 2)
        if len(curve):
            minutes, returns = curve[:, 0] / 60.0, curve[:, 1]
            ax1.scatter(minutes, returns, s=8, alpha=0.35, color=colour)
            k = max(1, min(10, len(returns) // 4))
            smooth = np.convolve(returns, np.ones(k) / k, mode="valid")
            ax1.plot(minutes[k - 1:], smooth, color=colour, label=f"{r['name']} (mean of {k})")
        ax2.plot(np.arange(len(r["released_per_minute"])) + 0.5,
                 100 * np.array(r["released_per_minute"]), marker="o", color=colour, label=r["name"])
    ax1.set(xlabel="wall-clock minutes", ylabel="episode return", title="return against wall-clock time")
    ax2.set(xlabel="wall-clock minutes", ylabel="% of the minute with keys released",
            title="game time with no input")
    ax1.legend()
    ax2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run both (unless --analyse), then print the comparison and write the plot."""
    p = argparse.ArgumentParser(prog="bench/realtime_learning.py", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=20.0, help="wall-clock budget per run (default 20)")
    p.add_argument("--preset", nargs="+", default=["catcher"], help="config presets (default catcher)")
    p.add_argument("--collect", type=int, default=256, help="sync loop: env steps per collect phase")
    p.add_argument("--out", type=pathlib.Path,
                   default=pathlib.Path("/tmp/dreamer_live_bench/realtime_learning"),
                   help="folder for both runs, the plot and the JSON (replaced unless --analyse)")
    p.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    p.add_argument("--analyse", action="store_true", help="only analyse runs already in --out")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:  # collect 64: the sync run trains within its 12 s
        args.minutes, args.collect, args.preset = 0.2, 64, [*args.preset, "debug"]
        args.out = smoke_dir("realtime_learning")
    from dreamer_live import config as configlib

    hz = configlib.resolve(args.preset, {}).actor.hz
    seconds = args.minutes * 60.0
    print(f"realtime_learning: {' '.join(args.preset)} at {hz:g} Hz, {args.minutes:g} min per run; "
          f"writing {args.out}", flush=True)
    if not args.analyse:
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        for name in args.runs:
            print(f"realtime_learning: {name} run, load {cadence.load_avg()} ...", flush=True)
            if name == "decoupled":
                run_decoupled(args.out / name, args.preset, seconds)
            else:
                run_sync(args.out / name, args.preset, seconds, args.collect)
            print(f"realtime_learning: {name} done, load {cadence.load_avg()}", flush=True)
    results = [analyse(name, args.out / name, hz) for name in args.runs if (args.out / name).is_dir()]
    head = ("| run | game s | steps | updates | episodes | game overs | time-capped | cut short (game over "
            "after a pause) | lives lost in pauses (at least) | keys released % | longest gap s | return "
            "first quarter | return last quarter |")
    print("\n" + head + "\n|" + "---|" * (head.count("|") - 1))
    for r in results:
        print(f"| {r['name']} | {r['seconds']:.0f} | {r['steps']} | {r['updates']} | {r['episodes']} | "
              f"{r['game_overs']} | {r['time_capped']} | {r['cut_short']} | {r['misses_in_pauses']} | "
              f"{100 * r['released_frac']:.2f} | {r['max_gap_s']:.2f} | {r['return_first_quarter']:.2f} | "
              f"{r['return_last_quarter']:.2f} |")
    by = {r["name"]: r for r in results}
    if len(by) == 2:
        d, s = by["decoupled"], by["sync"]
        gain = d["return_last_quarter"] - s["return_last_quarter"]
        print(f"\nlast-quarter return: decoupled {d['return_last_quarter']:.2f} vs sync "
              f"{s['return_last_quarter']:.2f} (difference {gain:+.2f}); updates {d['updates']} vs "
              f"{s['updates']} ({d['updates'] / max(1, s['updates']):.2f}x); env steps "
              f"{d['steps']} vs {s['steps']} ({d['steps'] / max(1, s['steps']):.2f}x); keys released "
              f"{100 * d['released_frac']:.2f}% vs {100 * s['released_frac']:.2f}% of game time")
    png = args.out / "realtime_learning.png"
    plot(results, png, f"real-time {' '.join(args.preset)}, {args.minutes:g} min each, "
                       f"{os.cpu_count()} CPU cores")
    (args.out / "realtime_learning.json").write_text(json.dumps(results, indent=1))
    print(f"realtime_learning: plot {png}, data {args.out / 'realtime_learning.json'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Learning curves as PNG from DIR/metrics.jsonl: return, losses, tick lateness, policy lag; runs overlaid.

    python -m dreamer_live.plot DIR [DIR ...] [--out FILE.png]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np

from dreamer_live import cli, metrics
from dreamer_live.atomic import atomic_path
from dreamer_live.errors import UserError

PANEL_INCHES = (5.0, 3.2)
COLUMNS = 3
MAX_LOSSES = 8
# The agent's losses (train/loss/<name>, agent.train), in the order they are shown when there are many.
PREFERRED_LOSSES = ("total", "wm", "dec", "rew", "con", "dyn", "rep", "policy", "value", "repval")
# Longer than this between two metric lines, the run was stopped (and later resumed in the same logdir):
# the gap is left out of its minutes. Actor and learner each write a line every few seconds (run.log_every).
STOPPED_S = 600.0


class Run:
    """One run's metric lines, split by source, with helpers to pull out a curve."""

    def __init__(self, logdir: pathlib.Path, name: str):
        self.logdir = pathlib.Path(logdir)
        self.name = name
        path = self.logdir / "metrics.jsonl"
        if not self.logdir.is_dir():
            raise UserError(f"{self.logdir} is not a directory")
        if not path.exists():
            raise UserError(f"{path} does not exist: no metrics yet (start the actor or learner "
                            f"with --logdir {self.logdir})")
        self.records = [r for r in metrics.read_lines(path)
                        if isinstance(r, dict) and "time" in r and "step" in r]
        self.start = min((r["time"] for r in self.records), default=0.0)
        self.running_s = self.seconds_running()
        self.steps = self.steps_counted_on()

    def seconds_running(self) -> list[float]:
        """Per line, seconds since the run's first line, less the gaps of over STOPPED_S (stops)."""
        out, stopped, last = [], 0.0, self.start
        for r in self.records:
            if r["time"] - last > STOPPED_S:
                stopped += r["time"] - last
            last = max(last, r["time"])
            out.append(r["time"] - self.start - stopped)
        return out

    def steps_counted_on(self) -> list[int]:
        """Per line, its step; an actor's counted on across restarts: each actor process counts from 0,
        so a step below its actor's last line's starts a new process, after the steps of those before."""
        out, last, before = [], {}, {}
        for r in self.records:
            step = r["step"]
            if r.get("source") == "actor":
                actor = r.get("actor/id")
                if step < last.get(actor, 0):
                    before[actor] = before.get(actor, 0) + last[actor]
                last[actor] = step
                step += before.get(actor, 0)
            out.append(step)
        return out

    def curve(self, source: str, key: str, x: str = "step") -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of `key` in `source`'s lines; x is "step" or "minutes" the run ran since its first line."""
        xs, ys = [], []
        for r, running_s, step in zip(self.records, self.running_s, self.steps):
            if r.get("source") != source or key not in r:
                continue
            y = r[key]
            ys.append(np.nan if y is None else float(y))
            xs.append(running_s / 60 if x == "minutes" else step)
        return np.asarray(xs, np.float64), np.asarray(ys, np.float64)

    def keys(self, source: str) -> set[str]:
        """Every metric key `source` has logged."""
        return {k for r in self.records if r.get("source") == source for k in r} - {
            "time", "source", "step"}


def loss_keys(runs: list[Run]) -> list[str]:
    """The main `train/` losses across runs: names with 'loss', preferred terms first, capped."""
    train = sorted({k for run in runs for k in run.keys("learner") if k.startswith("train/")})
    losses = [k for k in train if "loss" in k] or train

    def rank(key: str) -> tuple[int, str]:
        words = key.split("/", 1)[1].replace("/", "_").split("_")
        for i, word in enumerate(PREFERRED_LOSSES):
            if word in words:
                return i, key
        return len(PREFERRED_LOSSES), key

    return sorted(losses, key=rank)[:MAX_LOSSES]


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Moving average over the last `window` finite values (same length as y)."""
    if window <= 1 or len(y) == 0:
        return y
    good = np.where(np.isfinite(y), y, 0.0)
    count = np.isfinite(y).astype(np.float64)
    kernel = np.ones(window)
    sums = np.convolve(good, kernel)[: len(y)]
    counts = np.convolve(count, kernel)[: len(y)]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def panels(runs: list[Run]) -> list[tuple[str, str, list[tuple[str, str, str, str]]]]:
    """The figure's panels: (title, x label, [(source, key, x, style)])."""
    out = [
        ("episode return vs env steps", "env steps", [("actor", "episode/return", "step", "return")]),
        ("episode return vs wall-clock", "minutes", [("actor", "episode/return", "minutes", "return")]),
    ]
    furthest = sorted({k for run in runs for k in run.keys("actor") if k.startswith("episode/furthest_")})
    out += [(f"{key[len('episode/'):].replace('_', ' ')} per episode", "minutes",
             [("actor", key, "minutes", "return")]) for key in furthest]  # env.progress_key's best
    out += [(key, "learner updates", [("learner", key, "step", "-")]) for key in loss_keys(runs)]
    out += [
        ("tick lateness (ms): p99 solid, p50 dashed", "minutes",
         [("actor", "actor/late_ms_p99", "minutes", "-"), ("actor", "actor/late_ms_p50", "minutes", "--")]),
        ("late ticks (running total)", "minutes", [("actor", "actor/late_ticks", "minutes", "-")]),
        ("policy lag (learner updates)", "minutes", [("actor", "actor/policy_lag_steps", "minutes", "-")]),
        ("policy lag (seconds)", "minutes", [("actor", "actor/policy_lag_s", "minutes", "-")]),
    ]
    if any(run.keys("eval") for run in runs):
        out.append(("eval return: mean (line), episodes (dots)", "learner updates",
                    [("eval", "eval/return_mean", "step", "-"), ("eval", "eval/return", "step", ".")]))
    return out


def figure(runs: list[Run]):
    """The matplotlib figure (Agg canvas) with every panel and one colour per run."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layout = panels(runs)
    rows = math.ceil(len(layout) / COLUMNS)
    fig = Figure(figsize=(PANEL_INCHES[0] * COLUMNS, PANEL_INCHES[1] * rows), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, COLUMNS, squeeze=False).ravel()
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for ax, (title, xlabel, lines) in zip(axes, layout):
        drawn = False
        for run, color in zip(runs, colors):
            for source, key, x, style in lines:
                xs, ys = run.curve(source, key, x)
                if not len(xs):
                    continue
                drawn = True
                if style == "return":
                    ax.plot(xs, ys, ".", color=color, alpha=0.25, ms=3)
                    ax.plot(xs, smooth(ys, max(1, len(ys) // 20)), "-", color=color, lw=1.5,
                            label=run.name)
                else:
                    ax.plot(xs, ys, style, color=color, lw=1.2,
                            label=run.name if style == "-" else None)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if not drawn:
            ax.text(0.5, 0.5, "no data yet", ha="center", va="center", transform=ax.transAxes,
                    color="gray")
        elif title.startswith("train/") and _all_positive(ax):
            ax.set_yscale("log")
    for ax in axes[len(layout):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    if not handles:
        for ax in axes:
            handles, labels = ax.get_legend_handles_labels()
            if handles:
                break
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(len(runs), 6), fontsize=9,
                   frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (PANEL_INCHES[1] * rows)))
    return fig


def _all_positive(ax) -> bool:
    ys = np.concatenate([np.asarray(line.get_ydata(), np.float64) for line in ax.get_lines()])
    ys = ys[np.isfinite(ys)]
    return bool(len(ys)) and bool(np.all(ys > 0)) and ys.max() / ys.min() > 20


def run_names(dirs: list[pathlib.Path]) -> list[str]:
    """Legend names: the folder names, or longer path tails where those collide."""
    for depth in range(1, 6):
        names = ["/".join(pathlib.Path(d).resolve().parts[-depth:]) for d in dirs]
        if len(set(names)) == len(names):
            return names
    return [str(d) for d in dirs]


def plot(dirs: list[pathlib.Path], out: pathlib.Path) -> list[Run]:
    """Read every run's metrics and write the figure to `out` (PNG); return the runs read."""

    runs = [Run(d, n) for d, n in zip(dirs, run_names(dirs))]
    if not any(run.records for run in runs):
        raise UserError("no metric lines yet in " + ", ".join(str(r.logdir / "metrics.jsonl")
                                                             for r in runs))
    fig = figure(runs)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png")
    return runs


@cli.main
def main(argv: list[str] | None = None) -> int:
    """Entry point: python -m dreamer_live.plot DIR [DIR ...] [--out FILE.png]."""
    p = argparse.ArgumentParser(
        prog=cli.usage_name("dreamer_live.plot"),
        description="Learning curves from DIR/metrics.jsonl: return vs env steps and wall-clock, the "
                    "main losses, the actor's tick lateness and policy lag. Several runs share one "
                    "figure with a legend.")
    p.add_argument("logdirs", nargs="+", type=pathlib.Path, metavar="DIR", help="run directories")
    p.add_argument("--out", type=pathlib.Path, default=None,
                   help="PNG to write (default: FIRST_DIR/curves.png)")
    args = p.parse_args(argv)
    out = args.out or args.logdirs[0] / "curves.png"
    if out.suffix.lower() != ".png":
        raise UserError(f"--out {out}: plots are written as .png")
    for run in plot(args.logdirs, out):
        print(f"{run.logdir}: {len(run.records)} metric lines")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

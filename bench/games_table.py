"""The built-in games table: the CPU default trained on each game in lockstep, against random and scripted.

    .venv/bin/python bench/games_table.py [--games pong snake ...] [--obs vector image] [--seeds 0 1]
                                          [--updates 10000] [--jobs 2]     # runs what the data lacks
    .venv/bin/python bench/games_table.py --table        # the table and the figure from the data alone
    .venv/bin/python bench/games_table.py --compare bench/levers/actent_1e-2.json  # settings side by side
    .venv/bin/python bench/games_table.py --compare bench/levers/train_ratio_64.json --steps 13333  # same minutes
    .venv/bin/python bench/games_table.py --smoke        # 30 updates of the debug agent on two games

Each (game, observation, seed) is one bench/demo_lockstep.py run of the game's preset (`pong`, or
`pong_pixels` for images) with no agent keys of its own: the defaults' CPU agent, batch and train ratio,
at the game's real-time tick rate stepped in lockstep, so the figures do not depend on the machine.
Every episode's return is kept with the learner updates done when it ended. A uniformly random player
and the game's scripted player (dreamer_live/envs/games/players.py) play --baseline-episodes episodes
of the same env per seed (--rerun-baselines plays them again). The data file (--data, default bench/games_scores.json) keeps each finished
run and baseline as it ends, so an interrupted table goes on where it stopped: a run or baseline
already there is not run again (a run cut short starts over), and two table processes may share it.

The table, per game and observation: random and scripted means (per seed), the learner's mean of its
last 20 episodes at a few update counts up to the budget per seed, its score at the budget as a share
of the way from random (0) to scripted (1; a game whose episodes are so long that fewer than 20
ended by the budget is scored by the mean of those, marked *), and the updates after which the last
20 episodes first averaged half-way. Rows whose runs are missing say so. The figure (--figure) draws the learning
curves of every run the data file holds, whichever games the call names: one panel per game.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from smoke import add_smoke, smoke_dir  # noqa: E402

from dreamer_live.atomic import write_atomic  # noqa: E402

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
GAMES = ("catcher", "pong", "flappybird", "pixelcopter", "puckworld", "snake", "waterworld",
         "raycastmaze", "monsterkong")  # presets; `<game>_pixels` learns the same game from its screen
OBS = {"vector": "", "image": "_pixels"}  # observation -> preset suffix
WINDOW = 20  # episodes in the learner's running mean
HALF = 0.5  # the share of the way from random to scripted that counts as learned
DEFAULT_DATA = BENCH / "games_scores.json"
DEFAULT_FIGURE = BENCH / "figures" / "games_table.png"


def preset(game: str, obs: str) -> str:
    """The preset that plays `game` from `obs` (vector or image)."""
    return game + OBS[obs]


def run_key(name: str, obs: str, seed: int) -> str:
    """A bench data file's key of one run: what ran (a game, or peers_realtime's trainer), its
    observation, its seed."""
    return f"{name}/{obs}/{seed}"


def split_key(key: str) -> tuple[str, str, str]:
    """(name, observation, seed) of a run_key."""
    name, obs, seed = key.split("/")
    return name, obs, seed


def machine() -> str:
    """This machine in a few words: CPU model and core count (or the GPU the run used)."""
    model = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def provenance() -> dict:
    """Where and with what code a run or baseline starts: the commit, the machine, the date."""
    return {"commit": commit(), "machine": machine(), "date": datetime.date.today().isoformat()}


def commit() -> str:
    """The checkout's commit, with '+changes' when its code differs from it (not its data, figures or
    docs: the tables a running bench writes meanwhile)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  *(f":(exclude)*.{ext}" for ext in ("json", "png", "md")))
    return head + ("+changes" if changed else "")


def load(path: pathlib.Path) -> dict:
    """The data file, or an empty table."""
    if path.exists():
        return json.loads(path.read_text())
    return {"window": WINDOW, "runs": {}, "baselines": {}}


def store(path: pathlib.Path, data: dict, section: str, key: str, entry: dict) -> None:
    """Put one run or baseline into the data file as it is on disk now (another table process may have
    added to it), write it whole and atomically, and into `data`."""
    data[section][key] = entry
    fresh = load(path)
    fresh[section][key] = entry
    fresh = {**fresh, "runs": dict(sorted(fresh["runs"].items())),
             "baselines": dict(sorted(fresh["baselines"].items()))}
    write_atomic(path, (json.dumps(fresh, indent=1) + "\n").encode())


# --- baselines ------------------------------------------------------------------------------------

def baseline(game: str, seed: int, episodes: int, presets: list[str], overrides: dict) -> dict:
    """Random and scripted returns over `episodes` episodes of the game's lockstep env at `seed`."""
    from dreamer_live import config as configlib
    from dreamer_live.envs import lockstep_twin, make_env
    from dreamer_live.envs.games.players import play_episodes, scripted_action

    config = lockstep_twin(configlib.resolve([preset(game, "vector"), *presets], {**overrides, "seed": seed}))
    env = make_env(config)
    try:
        out = {"random": play_episodes(env, "random", episodes, seed=seed),
               "scripted": play_episodes(env, scripted_action, episodes, seed=seed)}
    finally:
        env.close()
    return {**out, "episodes": episodes}


# --- learner runs ---------------------------------------------------------------------------------

class Run:
    """One demo_lockstep process training a game's preset; its episodes go to a JSON-lines file."""

    def __init__(self, game: str, obs: str, seed: int, args, core: int | None):
        self.game, self.obs, self.seed, self.updates, self.core = game, obs, seed, args.updates, core
        logs = args.logs
        name = f"{preset(game, obs)}-seed{seed}"
        self.episodes_path, self.log_path = logs / f"{name}.episodes.jsonl", logs / f"{name}.log"
        self.episodes_path.unlink(missing_ok=True)  # a run cut short starts over
        cmd = [sys.executable, str(BENCH / "demo_lockstep.py"), "--configs", preset(game, obs), *args.configs,
               *args.rest, "--seed", str(seed), "--updates", str(self.updates),
               "--episodes", str(self.episodes_path),
               "--diagnose-every", str(10 ** 9)]
        # Several runs at once: each on its own core, so that they do not slow one another unevenly.
        pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
        self.log = self.log_path.open("w")
        self.began, self.provenance = time.monotonic(), provenance()  # the code this run starts with
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=pin)

    @property
    def key(self) -> str:
        """The run's key in the data file."""
        return run_key(self.game, self.obs, self.seed)

    def progress(self) -> str:
        """The latest progress line the run printed."""
        lines = [line for line in self.log_path.read_text().splitlines() if line.startswith("update")]
        return lines[-1] if lines else "compiling / prefilling"

    def record(self) -> dict:
        """The finished run's entry: its episodes as [updates done, env steps, return]."""
        episodes = [json.loads(line) for line in self.episodes_path.read_text().splitlines() if line]
        return {"updates": self.updates, "wall_s": round(time.monotonic() - self.began, 1),
                "episodes": [[e["update"], e["env_steps"], round(e["return"], 4)] for e in episodes],
                **self.provenance}


def run_all(args, data: dict, data_path: pathlib.Path) -> int:
    """Run the baselines and learner runs the data lacks, --jobs runs at once, saving each as it ends."""
    for game in args.games:
        for seed in args.seeds:
            key = f"{game}/{seed}"
            if key in data["baselines"] and not args.rerun_baselines:
                continue
            began, meta = time.monotonic(), provenance()
            store(data_path, data, "baselines", key,
                  {**baseline(game, seed, args.baseline_episodes, args.configs, args.overrides), **meta})
            b = data["baselines"][key]
            print(f"baseline {key}: random {np.mean(b['random']):.2f}, scripted {np.mean(b['scripted']):.2f} "
                  f"({args.baseline_episodes} episodes each, {time.monotonic() - began:.0f} s)", flush=True)
    pending = [(g, o, s) for g in args.games for o in args.obs for s in args.seeds
               if run_key(g, o, s) not in data["runs"]]
    print(f"{len(pending)} learner runs to go ({args.updates} updates each, {args.jobs} at once); "
          f"logs in {args.logs}", flush=True)
    cores = list(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    running: list[Run] = []
    failed = 0
    last_report = time.monotonic()
    try:
        while pending or running:
            while pending and len(running) < args.jobs:
                free = [c for c in cores if c not in {r.core for r in running}]
                core = free[0] if args.jobs > 1 and free else None
                run = Run(*pending.pop(0), args, core)
                running.append(run)
                print(f"started {run.key} (log {run.log_path})", flush=True)
            time.sleep(1.0)  # polling child processes that run for minutes
            for run in [r for r in running if r.proc.poll() is not None]:
                running.remove(run)
                run.log.close()
                if run.proc.returncode:
                    failed += 1
                    tail = run.log_path.read_text().splitlines()[-5:]
                    print(f"FAILED {run.key} (exit {run.proc.returncode}):\n  " + "\n  ".join(tail), flush=True)
                    continue
                entry = run.record()
                store(data_path, data, "runs", run.key, entry)
                tail = [e[2] for e in entry["episodes"][-WINDOW:]]
                print(f"finished {run.key}: {len(entry['episodes'])} episodes, last {len(tail)} mean "
                      f"{np.mean(tail) if tail else float('nan'):.2f}, {entry['wall_s']:.0f} s", flush=True)
            if running and time.monotonic() - last_report > args.report_every:
                last_report = time.monotonic()
                for run in running:
                    print(f"  {run.key}: {run.progress()}", flush=True)
    except KeyboardInterrupt:
        for run in running:
            run.proc.terminate()
            run.proc.wait()
        print(f"stopped: {len(running)} runs cut short (they start over next time); the data file "
              f"keeps every finished one", flush=True)
        return 130
    return 1 if failed else 0


# --- the table ------------------------------------------------------------------------------------

def running_mean(episodes: list, at: int) -> float | None:
    """Mean return of the last WINDOW episodes that ended by `at` updates (None before WINDOW of them)."""
    done = [e[2] for e in episodes if e[0] <= at]
    return float(np.mean(done[-WINDOW:])) if len(done) >= WINDOW else None


def final_mean(episodes: list, at: int) -> tuple[float | None, int, float | None]:
    """The score at the budget: the last WINDOW episodes' mean, or, in a game whose episodes are so
    long that fewer than WINDOW ended (at least half of them), the mean of all that did; with how
    many episodes it is the mean of and its standard error (the episodes' spread over sqrt(count):
    the noise of scoring by those episodes, not the spread between seeds)."""
    done = [e[2] for e in episodes if e[0] <= at]
    if len(done) < WINDOW // 2:
        return None, len(done), None
    last = done[-WINDOW:]
    mean, error = mean_error(last)
    return mean, len(last), error


def mean_error(returns: list) -> tuple[float, float]:
    """Mean of episode returns and its standard error (their spread over sqrt(count))."""
    return float(np.mean(returns)), float(np.std(returns, ddof=1) / np.sqrt(len(returns)))


def first_reaching(episodes: list, level: float) -> list | None:
    """The episode [updates done, steps played, return] after which the last WINDOW episodes first
    averaged `level` or more."""
    returns = [e[2] for e in episodes]
    for i in range(WINDOW, len(returns) + 1):
        if np.mean(returns[i - WINDOW:i]) >= level:
            return episodes[i - 1]
    return None


def within_steps(data: dict, steps: int) -> dict:
    """The data as if every run had stopped after `steps` steps played: its episodes that ended by
    then, its budget the updates done by then (runs at different train ratios on one clock)."""
    runs = {}
    for key, run in data["runs"].items():
        episodes = [e for e in run["episodes"] if e[1] <= steps]
        runs[key] = {**run, "episodes": episodes, "updates": episodes[-1][0] if episodes else 0}
    return {**data, "runs": runs}


def rows(data: dict, games, obs_kinds, seeds, checkpoints) -> list[dict]:
    """One row per game and observation with whatever the data holds of it."""
    out = []
    for game in games:
        bases = {s: data["baselines"][f"{game}/{s}"] for s in seeds if f"{game}/{s}" in data["baselines"]}
        random_by_seed = {s: mean_error(b["random"]) for s, b in bases.items()}
        random_means = [mean for mean, _ in random_by_seed.values()]
        scripted_means = [float(np.mean(b["scripted"])) for b in bases.values()]
        random, scripted = (float(np.mean(random_means)) if random_means else None,
                            float(np.mean(scripted_means)) if scripted_means else None)
        for obs in obs_kinds:
            row = {"game": game, "obs": obs, "random": random_means, "scripted": scripted_means,
                   "random_by_seed": random_by_seed, "seeds": {}}
            for seed in seeds:
                run = data["runs"].get(run_key(game, obs, seed))
                if run is None:
                    continue
                episodes = run["episodes"]
                final, counted, error = final_mean(episodes, run["updates"])
                share = share_error = None
                if final is not None and random is not None and scripted is not None and scripted != random:
                    share = (final - random) / (scripted - random)
                    share_error = error / abs(scripted - random)
                reached = first_reaching(episodes, random + HALF * (scripted - random)) \
                    if random is not None and scripted is not None else None
                half, half_steps = (int(reached[0]), int(reached[1])) if reached else (None, None)
                row["seeds"][seed] = {"curve": [running_mean(episodes, c) for c in checkpoints],
                                      "final": final, "final_error": error, "counted": counted,
                                      "share": share, "share_error": share_error, "half_at": half,
                                      "half_steps": half_steps,
                                      "updates": run["updates"], "episodes": len(episodes)}
            out.append(row)
    return out


def above_random(row: dict) -> bool | None:
    """Every seed's final mean beyond the random player's seeds: above their highest mean by more
    than the spread between them (None until both the runs and the baselines are in)."""
    finals = [s["final"] for s in row["seeds"].values()]
    if not finals or None in finals or not row["random"]:
        return None
    spread = max(row["random"]) - min(row["random"])
    return all(f > max(row["random"]) + spread for f in finals)


def beyond_noise(row: dict) -> bool | None:
    """Every seed's final mean above its own random player's by more than twice the standard error of
    the difference: the issue's rule with the scoring's noise, which two random seeds' spread (0 where
    they happen to agree) does not measure (None until both the runs and the baselines are in)."""
    pairs = [(got, row["random_by_seed"].get(seed)) for seed, got in row["seeds"].items()]
    if not pairs or any(got["final"] is None or rnd is None for got, rnd in pairs):
        return None
    return all(got["final"] - rnd[0] > 2 * np.hypot(got["final_error"], rnd[1]) for got, rnd in pairs)


def verdicts(row: dict) -> str:
    """The two above-random verdicts as the tables print them: the issue's rule, then beyond noise."""
    return " / ".join("-" if v is None else ("yes" if v else "no") for v in (above_random(row), beyond_noise(row)))


def print_compare(paths: list[pathlib.Path], games, obs_kinds, seeds, steps: int | None = None) -> None:
    """Data files side by side (a lever's settings), one line per game and observation: each file's
    share on every seed with its standard error, and their mean, then the steps played to half-way on
    each seed; the share's scale is the first file's random and scripted players, so every file is
    read on one scale. steps: score every run at that many steps played instead of at its budget."""
    datas = [load(path) for path in paths]
    datas = [dict(data, baselines=datas[0]["baselines"]) for data in datas]
    if steps:
        datas = [within_steps(data, steps) for data in datas]
    tables = [rows(data, games, obs_kinds, seeds, []) for data in datas]
    print(f"{'game':<12} {'obs':<6} " + " | ".join(f"{path.stem:<{20 * len(seeds) + 6}}" for path in paths))
    for i, row in enumerate(tables[0]):
        cells = []
        for table in tables:
            got = [table[i]["seeds"].get(seed) for seed in seeds]
            shares = [g["share"] for g in got if g and g["share"] is not None]
            cells.append(" ".join(f"{'-':^11} {'':>7} " if g is None or g["share"] is None else
                                  f"{g['share']:5.2f}±{g['share_error']:4.2f} {half_steps(g):>7} " for g in got)
                         + f" {fmt(float(np.mean(shares)) if shares else None):>5}")
        print(f"{row['game']:<12} {row['obs']:<6} " + " | ".join(cells))
    at = f"after {steps} steps played" if steps else "at the budget"
    print(f"(per file: on seeds {' '.join(map(str, seeds))} the share {at} ± its standard error over the "
          f"last {WINDOW} episodes and the steps played to half-way, then the mean share of the seeds run)")


def half_steps(seed_row: dict) -> str:
    """A seed's steps played to half-way as the comparison prints them: 16.6k, or never."""
    steps = seed_row["half_steps"]
    return "never" if steps is None else f"{steps / 1000:.1f}k"


def fmt(value, digits: int = 2) -> str:
    """A number for the table, '-' for none."""
    return "-" if value is None else f"{value:.{digits}f}"


def print_table(table: list[dict], checkpoints, seeds) -> None:
    """The table, one line per game and observation, one column group per seed."""
    head = (f"{'game':<12} {'obs':<6} {'random':>15} {'scripted':>15} | "
            + " | ".join(f"seed {s}: " + " ".join(f"{c // 1000:>4}k" if c % 1000 == 0 else f"{c:>5}"
                                                  for c in checkpoints) + "  share  half@" for s in seeds)
            + " | above random / beyond noise")
    print(head)
    print("-" * len(head))
    for row in table:
        r = "/".join(fmt(v, 1) for v in row["random"]) or "-"
        s = "/".join(fmt(v, 1) for v in row["scripted"]) or "-"
        cells = []
        for seed in seeds:
            got = row["seeds"].get(seed)
            if got is None:
                cells.append(f"seed {seed}: " + "not run".center(6 * len(checkpoints) - 1) + "      -      -")
                continue
            curve = " ".join(f"{fmt(v, 1):>5}" for v in got["curve"])
            half = got["half_at"] if got["half_at"] is not None else "never"
            short = "*" if got["counted"] < WINDOW else " "
            cells.append(f"seed {seed}: {curve} {fmt(got['share']):>5}{short} {half!s:>6}")
        print(f"{row['game']:<12} {row['obs']:<6} {r:>15} {s:>15} | " + " | ".join(cells) + f" | {verdicts(row)}")
    shares = [[s["share"] for s in row["seeds"].values()] for row in table]
    done = [(row, sh) for row, sh in zip(table, shares) if len(sh) == len(seeds) and None not in sh]
    halfway = sum(all(v >= HALF for v in sh) for _, sh in done)
    print(f"\n{len(done)} of {len(table)} rows complete; half-way to scripted on every seed: {halfway} of "
          f"{len(done)}; above random on every seed: {sum(bool(above_random(r)) for r, _ in done)} of {len(done)}"
          f" (beyond noise: {sum(bool(beyond_noise(r)) for r, _ in done)})")
    print(f"(share: the last {WINDOW} episodes' mean at the budget, 0 = random, 1 = scripted; half@: updates "
          f"to a last-{WINDOW} mean half-way; above random: beyond both random seeds' highest mean by more "
          f"than their spread; beyond noise: above the seed's own random mean by more than twice the standard "
          f"error of the difference; *: fewer than {WINDOW} episodes ended by the budget, the mean of those, "
          f"at least {WINDOW // 2})")


def print_markdown(table: list[dict], seeds) -> None:
    """The table as the docs show it: one markdown row per game and observation."""
    print("| game | observation | random | scripted | " + " | ".join(f"seed {s}: last {WINDOW} (share)"
                                                            for s in seeds) + " | half-way at | above random / beyond noise |")
    print("|---|---|---|---|" + "---|" * len(seeds) + "---|---|")
    for row in table:
        cells = []
        for seed in seeds:
            got = row["seeds"].get(seed)
            cells.append("not run" if got is None else f"{fmt(got['final'])} ({fmt(got['share'])})"
                         + (f" [{got['counted']} episodes]" if got["counted"] < WINDOW else ""))
        halves = [row["seeds"][s]["half_at"] for s in seeds if s in row["seeds"]]
        half = " / ".join("never" if h is None else f"{h:,}" for h in halves) or "-"
        print(f"| {row['game']} | {row['obs']} | {' / '.join(fmt(v) for v in row['random']) or '-'} | "
              f"{' / '.join(fmt(v) for v in row['scripted']) or '-'} | " + " | ".join(cells)
              + f" | {half} | {verdicts(row)} |")


def draw(data: dict, games, obs_kinds, seeds, budget: int, path: pathlib.Path) -> None:
    """Learning curves (last-WINDOW mean against updates), one panel per game; random and scripted lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 3
    fig, axes = plt.subplots((len(games) + cols - 1) // cols, cols, figsize=(4 * cols, 3 * ((len(games) + 2) // 3)),
                             squeeze=False)
    styles = {"vector": "-", "image": "--"}
    for ax, game in zip(axes.flat, games):
        for seed in seeds:
            for obs in obs_kinds:
                run = data["runs"].get(run_key(game, obs, seed))
                if not run:
                    continue
                returns = [e[2] for e in run["episodes"]]
                if len(returns) < WINDOW:
                    continue
                means = np.convolve(returns, np.ones(WINDOW) / WINDOW, "valid")
                ax.plot([e[0] for e in run["episodes"][WINDOW - 1:]], means, styles[obs],
                        label=f"{obs} seed {seed}")
        for name, color in (("random", "grey"), ("scripted", "black")):
            values = [np.mean(b[name]) for s in seeds if (b := data["baselines"].get(f"{game}/{s}"))]
            if values:
                ax.axhline(np.mean(values), color=color, linewidth=0.8, linestyle=":", label=name)
        ax.set_title(game)
        ax.set_xlim(0, budget)
        ax.set_xlabel("learner updates")
        ax.set_ylabel(f"return (last {WINDOW})")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(games):]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    print(f"figure: {path}")


def main(argv: list[str]) -> int:
    """Run what the data lacks (unless --table), then print the table and draw the figure."""
    p = argparse.ArgumentParser(prog="bench/games_table.py", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--games", nargs="+", default=list(GAMES), choices=GAMES, metavar="GAME",
                   help=f"games (default all: {' '.join(GAMES)})")
    p.add_argument("--obs", nargs="+", default=list(OBS), choices=list(OBS), help="observations (default both)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--updates", type=int, default=10_000, help="learner updates per run: the budget (default 10000)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, each pinned to its own core (default 1)")
    p.add_argument("--baseline-episodes", type=int, default=20, help="episodes of each baseline per seed")
    p.add_argument("--rerun-baselines", action="store_true",
                   help="play the chosen games' baselines again (a scripted player changed)")
    p.add_argument("--data", type=pathlib.Path, default=DEFAULT_DATA, help="the data file (JSON)")
    p.add_argument("--logs", type=pathlib.Path, default=ROOT / "logdir" / "games_table",
                   help="folder for each run's output and episodes")
    p.add_argument("--figure", type=pathlib.Path, default=DEFAULT_FIGURE, help="the learning curves' figure")
    p.add_argument("--table", action="store_true", help="print the table and draw the figure; run nothing")
    p.add_argument("--markdown", action="store_true", help="print the table as the docs show it, too")
    p.add_argument("--compare", nargs="+", type=pathlib.Path, metavar="DATA",
                   help="print --data's shares beside these data files' (a lever's settings, e.g. "
                        "bench/levers/*.json) on --data's scale; run nothing")
    p.add_argument("--steps", type=int, help="with --compare: score every run after this many steps "
                   "played (the same real-time minutes whatever each file's train ratio)")
    p.add_argument("--report-every", type=float, default=120.0, help="seconds between progress lines")
    p.add_argument("--configs", nargs="*", default=[], metavar="PRESET",
                   help="presets merged after each game's, for every run and baseline (keep such a table "
                        "in its own --data file)")
    add_smoke(p)
    args, rest = p.parse_known_args(argv)
    if args.updates < 1 or args.jobs < 1 or args.baseline_episodes < 1:
        p.error("--updates, --jobs and --baseline-episodes must be >= 1")
    from dreamer_live import config as configlib
    if args.smoke:
        scratch = smoke_dir("games_table")
        args.games, args.obs, args.seeds, args.updates = ["catcher", "snake"], ["vector"], [0], 30
        args.baseline_episodes, args.jobs, args.report_every = 2, 2, 10.0
        args.data, args.logs, args.figure = scratch / "games.json", scratch / "logs", scratch / "games.png"
        args.configs, rest = [*args.configs, "debug"], [*rest, "--env.time_cap_s", "2"]
    args.rest = rest  # config overrides (e.g. --agent.opt.lr 1e-3) for every run and baseline
    args.overrides = configlib.parse_overrides(rest)
    configlib.resolve([preset(args.games[0], args.obs[0]), *args.configs], args.overrides)  # bad keys: one line
    if args.configs or rest:
        print(f"every run and baseline with: {' '.join(['--configs', *args.configs] if args.configs else [])} "
              f"{' '.join(rest)}")
    if args.compare:
        print_compare([args.data, *args.compare], args.games, args.obs, args.seeds, args.steps)
        return 0
    data = load(args.data)
    code = 0
    if not args.table:
        args.logs.mkdir(parents=True, exist_ok=True)
        code = run_all(args, data, args.data)
        data = load(args.data)  # with the runs other table processes stored meanwhile (the figure draws all)
    budget = args.updates
    checkpoints = [budget // 4, budget // 2, 3 * budget // 4, budget]
    print(f"\ndata: {args.data}")
    table = rows(data, args.games, args.obs, args.seeds, checkpoints)
    print_table(table, checkpoints, args.seeds)
    if args.markdown:
        print()
        print_markdown(table, args.seeds)
    # the figure is the data file's, whichever games this call ran: every run it holds
    held = [split_key(key) for key in data["runs"]]
    if held:
        draw(data, [g for g in GAMES if any(h[0] == g for h in held)],
             [o for o in OBS if any(h[1] == o for h in held)], sorted({int(h[2]) for h in held}), budget,
             args.figure)
    if args.smoke:  # the comparison's code path too, at a clock the runs passed
        print_compare([args.data, args.data], args.games, args.obs, args.seeds, steps=50)
    return code


if __name__ == "__main__":
    from dreamer_live import cli
    raise SystemExit(cli.main(main)(sys.argv[1:]))

"""A live game for real, measured: actor + learner against scripted and random players, on Xvfb.

    python bench/live_run.py [--game supertux] [--minutes 60] [--player-minutes 10] [--phases ...]
                             [-- run.py arguments]
    python bench/live_run.py --summarize DIR [--at-updates N ...]
    python bench/live_run.py --smoke      # SuperTux: scripted 12 s, then demos 24 s, debug preset

--game names a live preset this bench knows (GAMES): SuperTux on one level (`supertux`) or LBreakout2
(`lbreakout2`). Phases, each on its own Xvfb display with the game started by the env (its saves kept
apart where the game has them):
  scripted     the game's scripted player (SuperTux: holds right and jumps; LBreakout2: fires and holds
               still), 15 actions per second, recorded through
               `python -m dreamer_live.record` for --player-minutes: the scripted baseline, and the
               demonstrations of `demos`
  random       a uniformly random player (one action of the profile's table per tick), recorded the same way
               (every player's record gets the arguments after --: config overrides such as --env.size)
  follower     where the game has one, a scripted player that reads the game's memory values each tick
               (LBreakout2: fires while the ball waits, else moves the paddle's middle under the ball),
               recorded the same way
  learn        `python -m dreamer_live.run` (actor + learner) for --minutes from when the game plays; in a
               --logdir where it ran before, it resumes (checkpoint and replay) for --minutes more
  demos        the same with the scripted recording as DIR/demos at --demo-fraction of every batch
The players press keys on the display (XTest) as a person would; `record` reads them from the keyboard.
Per phase it prints episodes, deaths, the mean and best of the game's figure per episode (SuperTux: the
actor's episode/furthest_x, with the share of episodes past the step at x 2144, the pit at 3740 and the
bell at 5360; LBreakout2: episode/return, one episode per game on the first level); the players' also
over the learner's episode count when they played that many; the learner's first and last episodes as
many as each player's, its last 20 (also as they stood at each --at-updates: runs compared at the
updates a slower machine affords), when its policy left uniform play, its figures per --window-minutes,
its updates, updates/s and train ratio; and where a player's episodes and the learner's last 20 end
most. The figure shows the game's figure per episode against minutes (running time: a resumed phase's
stop is left out).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import pathlib
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # live_fixtures.start_xvfb: the tests' private X display
sys.path.insert(0, str(REPO / "bench"))
from cadence import stop  # noqa: E402
from smoke import add_smoke, skip, smoke_dir  # noqa: E402

from dreamer_live import config as configlib  # noqa: E402
from dreamer_live.cli import interrupt_on_sigterm, stop_signal, stop_status  # noqa: E402
from dreamer_live.tools.plot import Run  # noqa: E402

PHASES = ("scripted", "random", "follower", "learn", "demos")
PLAYERS = ("scripted", "random", "follower")
LEVEL = "/usr/share/games/supertux2/levels/world1/welcome_antarctica.stl"
# SuperTux's scripted player, per cycle: right + jump for 6 ticks, right alone for 3, nothing for 1 (the
# game takes a key held since before the level started as no press: each cycle presses right anew).
SCRIPT = ("right_jump",) * 6 + ("right",) * 3 + ("idle",)
STOP_WAIT_S = 180  # a stopped run's checkpoint and shutdown
CTRL_C_WAIT_S = 10  # a terminal's Ctrl-C reaches the run too: time for it to stop on its own first
PROMPT_PAUSE_S = 1.0  # after pressing a reset key the player waits this long (a menu is open) before playing
GOAL_EPISODES = 20  # a learner's last this many episodes, against the scripted player's mean
MOVED = 0.99  # a policy whose randomness (entropy over the uniform's) is below this left uniform play
ENDS_SHOWN = 5  # where episodes end: the most common spans of the game's figure
GAME_START_S = 300.0  # the longest a phase waits for the game to play (env.live.wait_s's default)
PLAYING = "live: playing "  # the env's line once it found the game


@dataclasses.dataclass(frozen=True)
class Game:
    """What this bench knows of one live preset's game beyond its profile."""

    package: str  # Debian's package of the game
    figure: str  # the actor's per-episode metric the figures are about: episode/<figure>
    label: str  # its words in the summary and the figure
    span: float  # where episodes end: spans of the figure this wide
    decimals: int  # its decimals in the summary's curve
    scripted: Callable[[int], str]  # the scripted player: the profile's action at each tick
    # The figure's value of each landmark; an episode got past one when its figure is more than `beyond`
    # past it (Tux falling into the pit stops at x 3740.01). SuperTux's: the step, the pit, the bell (the
    # checkpoint), and solid ground again past the spike pit behind it (x 6112).
    landmarks: dict[str, float] = dataclasses.field(default_factory=dict)
    beyond: float = 0.0
    level: str = ""  # the launch command's last argument, replaced by --level (SuperTux's level file)
    saves: str = ""  # the variable of the game's environment that puts its saves in a folder
    home: Callable[[pathlib.Path], None] | None = None  # sets up a HOME folder the game starts with
    # The follower player: the profile's action for the game's memory values now (NaN: unreadable).
    follower: Callable[[dict[str, float]], str] | None = None


def plain_theme_home(home: pathlib.Path) -> None:
    """LBreakout2's settings in `home` with a theme of six flat dark backgrounds, the game's four
    themes then this one (docs/howto/own-game.md, step 5: on its textured ones the world
    model leaves the ball out). The game's settings file is `key»value` lines; it fills in the rest."""
    from PIL import Image
    themes = home / ".lgames" / "lbreakout2-themes" / "Plain"
    themes.mkdir(parents=True, exist_ok=True)
    for i in range(6):
        Image.new("RGB", (100, 100), (20, 20, 30)).save(themes / f"back{i}.png")
    settings = home / ".lgames" / "lbreakout2.conf"
    if not settings.exists():
        settings.write_bytes("@\ntheme_id\u00bb4\ntheme_count\u00bb5\n".encode("latin-1"))


def follow_the_ball(values: dict[str, float]) -> str:
    """LBreakout2's follower: fire while the ball waits on the paddle (or none is in play), else move the
    paddle's middle (its left edge + 27 of its 54 pixels) to within 8 pixels of the ball's (x + 6 of 12)."""
    if np.isnan(values["paddle_x"]):
        return "idle"
    if np.isnan(values["ball_x"]) or values["ball_waits"] == 1:
        return "fire"
    offset = values["ball_x"] + 6 - (values["paddle_x"] + 27)
    return "left" if offset < -8 else "right" if offset > 8 else "idle"


GAMES = {
    "supertux": Game(package="supertux", figure="furthest_x", label="furthest x", span=100, decimals=0,
                     scripted=lambda tick: SCRIPT[tick % len(SCRIPT)],
                     landmarks={"step": 2144, "pit": 3740, "bell": 5360, "spike_pit": 6112}, beyond=1,
                     level=LEVEL,
                     saves="SUPERTUX2_USER_DIR"),
    # Scripted: fires (launches a ball waiting on the paddle) and holds still.
    "lbreakout2": Game(package="lbreakout2", figure="return", label="return", span=1, decimals=2,
                       scripted=lambda tick: "fire", home=plain_theme_home, follower=follow_the_ball),
}


def package_profile(game: str) -> pathlib.Path:
    """The profile that the preset `game` plays."""
    from dreamer_live.envs.live import profile_path
    return profile_path(configlib.resolve([game]).env.profile)


def profile_for(game: str, level: str, folder: pathlib.Path) -> pathlib.Path:
    """The package's profile of `game` (its launch command ending in `level` where the game takes one,
    started with a HOME of its own where the bench sets one up), written to `folder`; a phase resumed
    there keeps the profile it began with."""
    path = folder / f"{game}_profile.yaml"
    if path.exists():
        return path
    data = configlib.read_yaml(package_profile(game))
    if GAMES[game].level:
        data["launch"]["command"] = [*data["launch"]["command"][:-1], level]
    if GAMES[game].home:
        home = folder / f"{game}_home"
        GAMES[game].home(home)
        data["launch"]["command"] = ["env", f"HOME={home.resolve()}", *data["launch"]["command"]]
    path.write_text(configlib.dump_yaml(data))
    return path


def follow(proc: subprocess.Popen) -> tuple[threading.Event, queue.Queue, queue.Queue]:
    """Echo a child's output; return an event set once its env plays the game (PLAYING), a queue of
    the reset keys that record asks a person to press (env.PRESS_PROMPT) and one of the game's pids
    (each time the env finds it)."""
    from dreamer_live.envs.live.env import PRESS_PROMPT
    playing, prompts, pids = threading.Event(), queue.Queue(), queue.Queue()

    def echo() -> None:
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.startswith(PLAYING):
                playing.set()
                pids.put(int(line.rsplit("(pid ", 1)[1].split(")")[0]))
            elif line.startswith(PRESS_PROMPT):
                prompts.put(line[len(PRESS_PROMPT):].split()[0].split("+"))

    threading.Thread(target=echo, daemon=True).start()
    return playing, prompts, pids


class GameValues:
    """The profile's memory values read from the game's process, as the follower sees them."""

    def __init__(self, profile: pathlib.Path, pids: queue.Queue) -> None:
        from dreamer_live.envs.live.profile import load_profile
        self.specs = load_profile(profile).values
        self.pids, self.reader = pids, None

    def now(self) -> dict[str, float]:
        """Every value now, NaN where it cannot be read (a ball not in play) or the game's pid is unknown."""
        from dreamer_live.envs.live.memory import MemoryReadError, ProcessGone, open_process, read_value
        while not self.pids.empty():
            if self.reader:
                self.reader.close()
            self.reader = open_process(self.pids.get())
        values = {}
        for spec in self.specs:
            try:
                values[spec.name] = read_value(spec, self.reader) if self.reader else np.nan
            except ProcessGone:
                self.reader, values[spec.name] = None, np.nan  # the env relaunches it: a new pid comes
            except MemoryReadError:
                values[spec.name] = np.nan
        return values


def play(name: str, game: Game, profile: pathlib.Path, display, seconds: float,
         record: subprocess.Popen, prompts: queue.Queue, pids: queue.Queue) -> None:
    """Hold the player's keys on `display` at 15 Hz until `record` exits (the player is the person); when
    record asks for a reset key (`prompts`), stop playing, press it, and play on PROMPT_PAUSE_S later."""
    from dreamer_live.envs.live.keys import KeyHolder, XTestKeys
    conn = display.xlib()
    keys = KeyHolder(XTestKeys(conn))
    rng = np.random.default_rng(0)
    actions = configlib.read_yaml(profile)["actions"]
    names = list(actions)
    values = GameValues(profile, pids) if name == "follower" else None
    tick, end, resume = 0, time.monotonic() + seconds + STOP_WAIT_S, 0.0
    try:
        while record.poll() is None and time.monotonic() < end:
            try:
                pressed = prompts.get_nowait()
            except queue.Empty:
                pressed = None
            if pressed:
                keys.release_all()
                keys.tap(pressed)
                resume = time.monotonic() + PROMPT_PAUSE_S
            elif time.monotonic() >= resume:
                if name == "random":
                    held = actions[names[rng.integers(len(names))]]
                elif values is not None:
                    held = actions[game.follower(values.now())]
                else:
                    held = actions[game.scripted(tick)]
                keys.set(held)
                tick += 1
            time.sleep(1 / 15)
    finally:
        keys.release_all()
        conn.close()


def run_phase(phase: str, logdir: pathlib.Path, args, rest: list[str]) -> None:
    """One phase on a fresh Xvfb display, its logdir `logdir/phase`."""
    from live_fixtures import start_xvfb
    folder = logdir / phase
    folder.mkdir(parents=True, exist_ok=True)
    game = GAMES[args.game]
    profile = profile_for(args.game, args.level, folder)
    display = start_xvfb()
    env = display.env(**{game.saves: str(folder / f"{args.game}_saves")} if game.saves else {})
    common = ["--logdir", str(folder), "--configs", *args.configs, "--env.profile", str(profile),
              "--env.live.display", display.name, "--env.live.launch", "true",  # the profile written above
              "--run.quiet", "true"]
    proc = None
    try:
        if phase in PLAYERS:
            seconds = args.player_minutes * 60
            cmd = [sys.executable, "-m", "dreamer_live.record", *common, "--actor.duration", str(seconds),
                   *rest]
            print(f"[{phase}]", " ".join(cmd), flush=True)
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, bufsize=1)
            play(phase, game, profile, display, seconds, proc, *follow(proc)[1:])
            code = stop(proc, STOP_WAIT_S, after=60)
        else:
            if phase == "demos":
                demos = logdir / "scripted" / "demos"
                if not demos.is_dir():
                    raise SystemExit(f"the demos phase needs {demos}: run the scripted phase first")
                shutil.copytree(demos, folder / "demos", dirs_exist_ok=True)
                common += ["--replay.demo_fraction", str(args.demo_fraction)]
            cmd = [sys.executable, "-m", "dreamer_live.run", *common, *rest]
            print(f"[{phase}]", " ".join(cmd), f"for {args.minutes} min", flush=True)
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, bufsize=1)
            playing = follow(proc)[0]
            end = time.monotonic() + GAME_START_S  # the minutes count play, not the game's start
            while not playing.wait(0.5) and proc.poll() is None and time.monotonic() < end:
                pass
            code = stop(proc, STOP_WAIT_S, after=args.minutes * 60)
        if code:
            raise SystemExit(f"[{phase}] exited with status {code}")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the child stops as it would alone, its checkpoint kept
        if proc is not None:
            stop(proc, STOP_WAIT_S, after=CTRL_C_WAIT_S)
        raise
    finally:
        display.proc.terminate()
        display.proc.wait(10)


def game_of(folder: pathlib.Path) -> str:
    """The game a phase's folder played (the profile profile_for wrote there)."""
    found = sorted(folder.glob("*_profile.yaml"))
    if not found:
        raise SystemExit(f"{folder} holds no *_profile.yaml: not a phase of bench/live_run.py")
    return found[0].name[:-len("_profile.yaml")]


def episodes(folder: pathlib.Path, by_updates: int | None = None) -> dict[str, np.ndarray]:
    """Per episode of a phase: minutes since its start, the game's figure, death (1) or not (0); a
    learner's also the updates done when it ended (`by_updates`: only the episodes that ended by then)."""
    run = Run(folder, folder.name)
    source = "record" if folder.name in PLAYERS else "actor"
    minutes, figure = run.curve(source, f"episode/{GAMES[game_of(folder)].figure}", "minutes")
    _, died = run.curve(source, "episode/terminal", "minutes")
    out = {"minutes": minutes, "figure": figure, "died": died}
    if source == "actor":
        at = run.curve("learner", "learner/updates_per_s", "minutes")[0]  # its lines' step: updates
        updates = run.curve("learner", "learner/updates_per_s")[0]
        out["updates"] = np.interp(minutes, at, updates, left=0) if len(at) else np.zeros_like(minutes)
        if by_updates is not None:
            out = {k: v[out["updates"] <= by_updates] for k, v in out.items()}
    return out


def some_episodes(folder: pathlib.Path, count: int | None = None, last: bool = False,
                  by_updates: int | None = None) -> dict[str, np.ndarray]:
    """`episodes` of the first (or `last`) `count` episodes (all: None)."""
    return {k: (v[-count:] if last else v[:count]) if count else v
            for k, v in episodes(folder, by_updates).items()}


def missing_game(game: str = "supertux") -> str:
    """Why `game` cannot run here (no Xvfb, no game binary at its profile's launch command), or ""."""
    command = configlib.read_yaml(package_profile(game))["launch"]["command"]
    binary = next(word for word in command if word != "env" and "=" not in word)  # past `env VAR=...`
    if shutil.which("Xvfb") and os.path.exists(binary):
        return ""
    return f"needs Xvfb and {binary} (apt-get install xvfb {GAMES[game].package})"


def figures(folder: pathlib.Path, count: int | None = None, last: bool = False,
            by_updates: int | None = None) -> dict:
    """Episodes, deaths, the mean and best of the game's figure, the share of episodes past each
    landmark, over the first (or `last`) `count` episodes (all: None; `by_updates`: of those that ended
    by then); a learner's updates, updates/s and train ratio."""
    ep = some_episodes(folder, count, last, by_updates)
    game, x = GAMES[game_of(folder)], ep["figure"]
    out = {"episodes": len(x), "deaths": int(ep["died"].sum())}
    if len(x):
        out.update(mean=float(x.mean()), best=float(x.max()), minutes=float(ep["minutes"][-1]),
                   **{f"past_{name}": float((x > at + game.beyond).mean())
                      for name, at in game.landmarks.items()})
    if folder.name not in PLAYERS:
        run = Run(folder, folder.name)
        steps, rates = run.curve("learner", "learner/updates_per_s")
        busy = rates[rates > 0]
        ratios = run.curve("learner", "learner/train_ratio")[1]
        out.update(updates=int(steps[-1]) if len(steps) else 0,
                   updates_per_s=float(busy.mean()) if len(busy) else 0.0,
                   train_ratio=float(ratios[-1]) if len(ratios) else 0.0)
    return out


def ends(folder: pathlib.Path, count: int | None = None, by_updates: int | None = None) -> str:
    """Where the last `count` episodes (all: None) ended: the ENDS_SHOWN most common spans of the game's
    figure (Game.span wide), each with its episodes and deaths."""
    ep, game = some_episodes(folder, count, last=True, by_updates=by_updates), GAMES[game_of(folder)]
    spans, died = ep["figure"] // game.span * game.span, ep["died"]
    values, counts = np.unique(spans, return_counts=True)
    return ", ".join(f"{game.label} {s:g} to {s + game.span:g} {int((spans == s).sum())} "
                     f"({int(died[spans == s].sum())} died)"
                     for s in values[np.argsort(-counts, kind="stable")][:ENDS_SHOWN])


def windows(folder: pathlib.Path, minutes: float) -> list[tuple[str, int, int, float, float]]:
    """Per `minutes` of a phase: its label, episodes, deaths, the mean and best of the game's figure."""
    ep = episodes(folder)
    out = []
    for start in np.arange(0, ep["minutes"].max(initial=0), minutes):
        inside = (ep["minutes"] >= start) & (ep["minutes"] < start + minutes)
        if inside.any():
            x = ep["figure"][inside]
            out.append((f"{start:.0f}-{start + minutes:.0f}", int(inside.sum()),
                        int(ep["died"][inside].sum()), float(x.mean()), float(x.max())))
    return out


def moved(folder: pathlib.Path) -> str:
    """When a learner's policy left uniform play: the first report of train/policy_randomness below
    MOVED (minutes, updates)."""
    run = Run(folder, folder.name)
    minutes, randomness = run.curve("learner", "train/policy_randomness", "minutes")
    updates = run.curve("learner", "train/policy_randomness")[0]
    below = np.flatnonzero(randomness < MOVED)
    if not len(below):
        return f"the policy's randomness never went below {MOVED}"
    return (f"the policy's randomness first below {MOVED} at minute {minutes[below[0]]:.1f}, "
            f"{updates[below[0]]:.0f} updates")


def shown(figs: dict) -> str:
    """A summary line's figures: deaths, mean, best and the shares past the landmarks."""
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in figs.items()
                     if k in ("deaths", "mean", "best") or k.startswith("past_"))


def summarize(logdir: pathlib.Path, window: float, at_updates: tuple[int, ...] = ()) -> None:
    """Print each phase's figures (players also over the learner's episode count, a learner's also per
    `window` minutes and by each of `at_updates`) and draw the figure."""
    done = [p for p in PHASES if (logdir / p / "metrics.jsonl").exists()]
    if not done:
        raise SystemExit(f"no phase of {logdir} has metrics")
    game = game_of(logdir / done[0])
    learned = figures(logdir / "learn")["episodes"] if "learn" in done else None
    played = {p: figures(logdir / p)["episodes"] for p in done if p in PLAYERS}
    for phase in done:
        print(f"{phase:>9}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in figures(logdir / phase).items()))
        if phase in PLAYERS:
            print(f"{'':>9}  its episodes end most at: {ends(logdir / phase)}")
        if phase in PLAYERS and learned:
            same = figures(logdir / phase, learned)
            print(f"{'':>9}  over the learner's first {learned} episodes (played {same['episodes']}): "
                  + shown(same))
        if phase not in PLAYERS:
            for (player, count), last in itertools.product(played.items(), (False, True)):
                some = figures(logdir / phase, count, last)  # as many episodes as the player's
                print(f"{'':>9}  its {'last' if last else 'first'} {some['episodes']} episodes (as many as "
                      f"{player}'s): " + shown(some))
            goal = figures(logdir / phase, GOAL_EPISODES, last=True)
            print(f"{'':>9}  its last {goal['episodes']} episodes: "
                  + shown(goal) + f"; they end most at: {ends(logdir / phase, GOAL_EPISODES)}")
            for updates in at_updates:  # runs compared at the updates a slower machine affords
                some = figures(logdir / phase, GOAL_EPISODES, True, updates)
                print(f"{'':>9}  its last {some['episodes']} episodes by {updates} updates: " + shown(some)
                      + f"; they end most at: {ends(logdir / phase, GOAL_EPISODES, updates)}")
            print(f"{'':>9}  {moved(logdir / phase)}")
            print(f"{'':>9}  per {window:.0f} minutes: " + "; ".join(
                f"{w}: {n} episodes, {d} deaths, mean {m:.{GAMES[game].decimals}f}, "
                f"best {b:.{GAMES[game].decimals}f}"
                for w, n, d, m, b in windows(logdir / phase, window)))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for phase in done:
        ep = episodes(logdir / phase)
        ax.plot(ep["minutes"], ep["figure"], ".", alpha=0.5, label=phase)
    ax.set(xlabel="minutes", ylabel=f"{GAMES[game].label} per episode", title=f"{game}: {logdir.name}")
    ax.legend()
    out = logdir / f"{game}_run.png"
    fig.savefig(out, dpi=100, bbox_inches="tight")
    print(f"figure: {out}")


def main() -> int:
    """Run the phases (or summarize --summarize DIR) and print their figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0, help="minutes of each learning phase")
    p.add_argument("--player-minutes", type=float, default=10.0, help="minutes of each scripted player")
    p.add_argument("--demo-fraction", type=float, default=0.25, help="replay.demo_fraction of `demos`")
    p.add_argument("--phases", nargs="+", choices=PHASES, default=None,
                   help="default: all, the follower where the game has one")
    p.add_argument("--game", choices=GAMES, default="supertux", help="the live preset played (default "
                   "supertux)")
    p.add_argument("--configs", nargs="+", default=None, help="presets of every phase (default: --game)")
    p.add_argument("--level", default=LEVEL, help="the level file SuperTux starts")
    p.add_argument("--logdir", type=pathlib.Path, default=None,
                   help="a logdir whose learning phase ran already resumes it for --minutes more")
    p.add_argument("--window-minutes", type=float, default=10.0, help="the summary's learning curve: "
                   "figures per this many minutes")
    p.add_argument("--summarize", type=pathlib.Path, default=None, metavar="DIR")
    p.add_argument("--at-updates", type=int, nargs="+", default=[], metavar="N",
                   help="the learner's last 20 episodes also as they stood at N updates")
    add_smoke(p)
    p.add_argument("rest", nargs=argparse.REMAINDER,
                   help="arguments for dreamer_live.run after -- (config overrides reach the players' record too)")
    args = p.parse_args()
    if args.summarize:
        summarize(args.summarize, args.window_minutes, args.at_updates)
        return 0
    args.configs = args.configs or [args.game]
    args.phases = args.phases or [p for p in PHASES if p != "follower" or GAMES[args.game].follower]
    if "follower" in args.phases and not GAMES[args.game].follower:
        raise SystemExit(f"--game {args.game} has no follower player")
    if args.smoke:  # a player (record) and a learner with its demos: the code of all four phases
        args.minutes, args.player_minutes, args.phases = 0.4, 0.2, ["scripted", "demos"]
        args.configs, args.logdir = [*args.configs, "debug"], smoke_dir("live_run")
    missing = missing_game(args.game)
    if missing:
        if args.smoke:
            return skip("live_run", missing)
        raise SystemExit(missing)
    logdir = args.logdir or REPO / "logdir" / f"bench-{args.game}-{time.strftime('%Y%m%d-%H%M%S')}"
    rest = [a for a in args.rest if a != "--"]
    interrupt_on_sigterm()  # a run started in the background ignores Ctrl-C's SIGINT; SIGTERM stops it as Ctrl-C
    try:
        for phase in args.phases:
            run_phase(phase, logdir, args, rest)
    except KeyboardInterrupt as e:
        name = stop_signal(e)
        print(f"live_run: stopped ({name}); what ran so far in {logdir}:", flush=True)
        summarize(logdir, args.window_minutes, args.at_updates)
        return stop_status(name)
    summarize(logdir, args.window_minutes, args.at_updates)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

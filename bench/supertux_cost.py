"""SuperTux's own CPU cost per window size: what the game takes from a learner beside it, on Xvfb.

    .venv/bin/python bench/supertux_cost.py [--sizes 640x480 320x240] [--rounds 3] [--seconds 20]
    .venv/bin/python bench/supertux_cost.py --smoke      # one round of 3 s per size

Per round and size, the sizes alternated, each on a fresh Xvfb display: the env of the `supertux` preset
(the profile's launch command with `--geometry SIZE`) starts the game, resets it as the actor does
(title card, Restart Level) and holds right and jump in the scripted player's rhythm at the preset's
decisions per second for --seconds. The game process's CPU time over those seconds (/proc/PID/stat) is
its share of one core; the env's capture + preprocess time per tick is the actor's side. Prints per size
the shares of every round, their median and its ratio to the first size's. SuperTux 0.6.3 draws the
level unscaled, so a smaller window shows less of it (480x360: 240 px ahead of a centred Tux instead of
320).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # live_fixtures.start_xvfb: the tests' private X display
sys.path.insert(0, str(REPO / "bench"))
from live_run import SCRIPT, missing_game  # noqa: E402
from smoke import add_smoke, skip, smoke_dir  # noqa: E402

from dreamer_live import config as configlib  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (/proc/PID/stat)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile_at(size: str, folder: pathlib.Path) -> pathlib.Path:
    """The package's supertux profile with the launch command's --geometry set to `size`."""
    data = configlib.read_yaml(configlib.CONFIG_DIR / "games/supertux.yaml")
    command = data["launch"]["command"]
    command[command.index("--geometry") + 1] = size
    path = folder / f"supertux_{size}.yaml"
    path.write_text(configlib.dump_yaml(data))
    return path


def measure(size: str, seconds: float, folder: pathlib.Path) -> tuple[float, float]:
    """(the game's share of a core, capture + preprocess ms per tick) while the env plays at `size`."""
    from live_fixtures import start_xvfb

    from dreamer_live.envs import make_env, tick_hz
    display = start_xvfb()
    os.environ["SUPERTUX2_USER_DIR"] = str(folder / f"saves_{size}")  # the game's settings, kept apart
    config = configlib.resolve(["supertux"], {"env.profile": str(profile_at(size, folder)),
                                              "env.live.display": display.name, "env.live.launch": "true"})
    env, hz = make_env(config), tick_hz(config)  # the preset's decisions per second
    actions = list(configlib.read_yaml(config.env.profile)["actions"])
    try:
        env.reset()
        pid = env.unwrapped.launcher.process.pid  # the game this env started
        began, used, tick = time.monotonic(), cpu_seconds(pid), 0
        while time.monotonic() - began < seconds:
            env.act(actions.index(SCRIPT[tick % len(SCRIPT)]))
            time.sleep(max(0.0, began + (tick + 1) / hz - time.monotonic()))
            if env.observe()["is_last"]:
                env.reset()
            tick += 1
        share = (cpu_seconds(pid) - used) / (time.monotonic() - began)
        return share, env.metrics().get("live/capture_ms", float("nan"))
    finally:
        env.close()
        display.proc.terminate()
        display.proc.wait(10)


def main() -> int:
    """Measure each size in alternation and print the shares and their ratio."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["640x480", "320x240"], help="window sizes, WIDTHxHEIGHT")
    p.add_argument("--rounds", type=int, default=3, help="times each size is measured, alternated")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds of play measured per round")
    add_smoke(p)
    args = p.parse_args()
    if args.smoke:
        args.rounds, args.seconds = 1, 3.0
    missing = missing_game()
    if missing:
        return skip("supertux_cost", missing) if args.smoke else p.exit(2, missing + "\n")
    folder = smoke_dir("supertux_cost")
    shares: dict[str, list[float]] = {size: [] for size in args.sizes}
    for round_ in range(args.rounds):
        for size in args.sizes:
            share, capture_ms = measure(size, args.seconds, folder)
            shares[size].append(share)
            print(f"round {round_ + 1} {size:>9}: the game used {share:.2f} of a core, capture + "
                  f"preprocess {capture_ms:.2f} ms per tick", flush=True)
    first = float(np.median(shares[args.sizes[0]]))
    for size, values in shares.items():
        median = float(np.median(values))
        print(f"{size:>9}: median {median:.2f} of a core ({', '.join(f'{v:.2f}' for v in values)}), "
              f"{median / first:.2f}x the {args.sizes[0]} window's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Several bench/demo_lockstep.py runs side by side: variants x seeds, one table of updates to a return.

    python bench/lockstep_sweep.py --configs catcher_pixels --updates 7000 --until 20 --seeds 0 1 \
        --variant base= --variant rew10="--agent.loss_scales.rew 10" [--jobs 16] [--deadline 480] [--logs DIR]
    python bench/lockstep_sweep.py --smoke      # two variants of state Catcher's debug agent, 20 updates

Each variant is NAME=OVERRIDES (config overrides as demo_lockstep takes them; empty for the preset as
it is). Every (variant, seed) is one demo_lockstep process; --jobs run at once (on a GPU machine they
share the GPU: JAX preallocation is off unless the environment sets it). A run still going at
--deadline seconds is stopped and counted as not reached. Prints per run: the update at which the last
10 episodes first averaged --until (or "not reached"), the env steps then, the last-10 mean at every
--every updates, and per variant the mean updates to the threshold over the seeds that reached it and
its ratio to the first variant's. Each run's whole output is kept in --logs.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from smoke import add_smoke, smoke_dir  # noqa: E402

BENCH = pathlib.Path(__file__).resolve().parent
PROGRESS = re.compile(r"^update\s+(\d+) \|.*\| env steps\s+(\d+) \|.*\| return \(last 10\)\s+(\S+)")
REACHED = re.compile(r"^reached \S+ .* at update (\d+) \| env steps (\d+)")


def parse(text: str) -> dict:
    """{'curve': {update: last-10 mean}, 'reached': (update, env steps) or None, 'last': update} of a log."""
    curve, reached = {}, None
    for line in text.splitlines():
        if m := PROGRESS.match(line):
            curve[int(m.group(1))] = float(m.group(3))
        elif m := REACHED.match(line):
            reached = (int(m.group(1)), int(m.group(2)))
    last = reached[0] if reached else max(curve, default=0)
    return {"curve": curve, "reached": reached, "last": last}


def main(argv: list[str]) -> int:
    """Run the variants x seeds, --jobs at a time, and print the comparison."""
    p = argparse.ArgumentParser(prog="bench/lockstep_sweep.py", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--configs", nargs="*", default=["catcher_pixels"], metavar="PRESET")
    p.add_argument("--updates", type=int, default=7000, help="updates per run at most (default 7000)")
    p.add_argument("--until", type=float, default=20.0, help="the return threshold (default 20)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--variant", action="append", default=[], metavar="NAME=OVERRIDES")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs at once (default: CPUs)")
    p.add_argument("--deadline", type=float, default=0.0, help="seconds after which runs stop (0 = none)")
    p.add_argument("--every", type=int, default=1000, help="updates between the table's columns")
    p.add_argument("--logs", type=pathlib.Path, default=None, help="folder for each run's output")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:
        args.configs, args.updates, args.seeds = ["catcher", "debug"], 20, [0]  # the state game: no CNN to compile
        args.variant = args.variant or ["base=", "rew10=--agent.loss_scales.rew 10"]
        args.every, args.jobs = 10, 2
        args.logs = smoke_dir("lockstep_sweep")
    variants = []
    for spec in args.variant or ["base="]:
        name, sep, overrides = spec.partition("=")
        if not sep or not name:
            p.error(f"--variant must be NAME=OVERRIDES, got {spec!r}")
        variants.append((name, shlex.split(overrides)))
    logs = args.logs or pathlib.Path(f"lockstep_sweep-{time.strftime('%Y%m%d-%H%M%S')}")
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

    pending = [(name, seed, overrides) for name, overrides in variants for seed in args.seeds]
    running, began = [], time.monotonic()
    print(f"{len(pending)} runs, {args.jobs} at once, logs in {logs}", flush=True)
    while pending or running:
        while pending and len(running) < args.jobs:
            name, seed, overrides = pending.pop(0)
            log = open(logs / f"{name}-seed{seed}.log", "w")
            cmd = [sys.executable, str(BENCH / "demo_lockstep.py"), "--configs", *args.configs,
                   "--updates", str(args.updates), "--until", str(args.until), "--seed", str(seed),
                   *overrides]
            log.write(" ".join(map(shlex.quote, cmd)) + "\n")
            log.flush()
            running.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        time.sleep(1.0)
        late = args.deadline and time.monotonic() - began > args.deadline
        for proc, log in list(running):
            if late and proc.poll() is None:
                proc.kill()
            if proc.poll() is not None:
                log.close()
                running.remove((proc, log))
                print(f"  {pathlib.Path(log.name).stem} done at {time.monotonic() - began:.0f} s "
                      f"(exit {proc.returncode})", flush=True)

    columns = list(range(args.every, args.updates + 1, args.every))
    print(f"\nconfigs {' '.join(args.configs)}, threshold {args.until:g} (last 10 episodes), "
          f"at most {args.updates} updates")
    print(f"{'run':<24} {'reached at':>10} {'env steps':>9}  " + " ".join(f"{c:>6}" for c in columns))
    means = {}
    for name, _ in variants:
        reached = []
        for seed in args.seeds:
            result = parse((logs / f"{name}-seed{seed}.log").read_text())
            at, steps = result["reached"] or (None, None)
            reached.append(at)
            row = " ".join(f"{result['curve'].get(c, float('nan')):6.1f}" if c <= result["last"] else
                           f"{'':>6}" for c in columns)
            where = f"{at:>10}" if at else f"{'no (' + str(result['last']) + ')':>10}"
            print(f"{name + ' seed ' + str(seed):<24} {where} {steps or '':>9}  {row}")
        done = [r for r in reached if r]
        means[name] = (sum(done) / len(done) if len(done) == len(reached) else None)
    base = means[variants[0][0]]
    print("\nmean updates to the threshold (all seeds reached), and against the first variant:")
    for name, _ in variants:
        mean = means[name]
        ratio = f"{mean / base:.2f}x" if mean and base else "-"
        print(f"  {name:<22} {f'{mean:.0f}' if mean else 'not on every seed':>18}  {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Many actors, one learner: the Ray transport against the file transport, 1, 2 and 4 actors.

    .venv/bin/python bench/ray_scaleout.py --seconds 40 --actors 1 2 4 [--transports file ray] [--out DIR]
    .venv/bin/python bench/ray_scaleout.py --smoke      # 1 actor, 3 s per transport, debug preset

Each condition runs the real processes on this machine, 64x64 RGB frames of the real-time built-in
Catcher at 15 Hz (`--configs catcher --env.obs image --env.size '[64, 64]' --env.grayscale false`, the
demo's agent, or --configs; chunks flushed every --chunk-seconds):
  file  N `python -m dreamer_live.actor --actor.id k` processes writing DIR/replay, and
        `python -m dreamer_live.learner` reading it
  ray   `python -m dreamer_live.run --ray.address local --ray.actors N`: a private Ray cluster, the
        actors' chunks through the object store to the Hub, which persists them into DIR/replay
The learner waits for a prefill it never reaches (run.prefill 1e9): it refreshes its replay every
second (the ingest), compiles its train step once before the window, and does not train, so the CPU
left is the transport's. The measured window of --seconds starts once every actor has logged a ticks
line and the learner's train step is compiled.

Printed per condition:
  ingest     env steps per second landing in DIR/replay (the learner's replay folder) in the window:
             chunk files whose modification time is in it
  delivery   p50 / max s from a chunk's last tick to its file in DIR/replay (flush wait + write, and
             for ray the shipping)
  late, gap  per actor, from the chunks' tick_time / tick_late_ms (bench/cadence.py's definitions):
             ticks starting more than 10% of the period late, longest time between two ticks in periods
  CPU %      of one core, from /proc (utime + stime) over the window: each actor process (mean), the
             learner, and for ray the Hub and the rest of the cluster (raylet, GCS, the launcher, ...)
  transport CPU per actor: (ray's actors + Hub + rest) / N minus file's actors / N at the same N
and the per-chunk figures the cluster estimate in docs/ray.md is worked out from: bytes per step and
per chunk, the Hub's CPU ms per chunk, the extra actor CPU ms per chunk shipped. Last, ray / file
ingest.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))  # procfs: /proc readings

from cadence import load_avg, read_ticks, stop, tick_stats  # noqa: E402
from procfs import descendants, stat_fields  # noqa: E402
from smoke import add_smoke, smoke_dir  # noqa: E402

from dreamer_live.metrics import read_lines  # noqa: E402
from dreamer_live.replay.chunk import list_chunks, load_chunk  # noqa: E402

HZ = 15.0
TICK = os.sysconf("SC_CLK_TCK")
GAME = ["--env.obs", "image", "--env.size", "[64, 64]",
        "--env.grayscale", "false", "--actor.hz", str(HZ), "--run.quiet", "true",
        "--run.prefill", "1000000000", "--run.video_every", "0"]


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of one process so far; None when it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / TICK


def cmdline(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def actor_pids(logdir: pathlib.Path) -> dict[int, int]:
    """actor id -> pid, from the actors' ticks lines."""
    return {r["actor/id"]: r["actor/pid"] for r in read_lines(logdir / "metrics.jsonl", "actor")
            if "actor/ticks_per_s" in r}


def wait_for(what: str, check, timeout: float, procs) -> None:
    """Poll `check` every 0.5 s; raise when a process exits or `timeout` passes."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        for proc, log in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: a process exited ({proc.returncode}): "
                                   f"{log.read_text()[-2000:]}")
        if check():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {timeout:.0f} s")


def start(cmd: list[str], log: pathlib.Path) -> subprocess.Popen:
    f = log.open("ab")
    return subprocess.Popen([sys.executable, "-m", *cmd], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                            process_group=0, env=dict(os.environ, PYTHONUNBUFFERED="1",
                                                      JAX_PLATFORMS="cpu"))


def run_condition(transport: str, n: int, seconds: float, chunk_s: float, logdir: pathlib.Path,
                  presets: list[str]) -> dict:
    """One condition; its figures."""
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir(parents=True)
    common = ["--logdir", str(logdir), "--configs", *presets, *GAME, "--replay.chunk_seconds", str(chunk_s)]
    procs: list[tuple[subprocess.Popen, pathlib.Path]] = []
    load_before = load_avg()
    try:
        if transport == "file":
            log = logdir / "learner.out"
            procs.append((start(["dreamer_live.learner", *common], log), log))
            for k in range(n):
                log = logdir / f"actor{k}.out"
                procs.append((start(["dreamer_live.actor", *common, "--actor.id", str(k)], log), log))
        else:
            log = logdir / "run.out"
            procs.append((start(["dreamer_live.run", *common, "--ray.address", "local",
                                 "--ray.actors", str(n), "--ray.outbox", str(logdir / "outbox")],
                                log), log))
        logs = [log for _, log in procs]
        wait_for("every actor ticking", lambda: len(actor_pids(logdir)) == n, 300, procs)
        wait_for("the learner's train step compiled", lambda: any(
            "train step ready" in log.read_text() for log in logs), 600, procs)
        actors = actor_pids(logdir)
        if transport == "file":
            learner = procs[0][0].pid
        else:
            found = re.search(r"\(Worker pid=(\d+)\)\S* learner:", logs[0].read_text())
            learner = int(found.group(1)) if found else -1
        everything = set().union(*({p.pid} | descendants(p.pid) for p, _ in procs))
        t0, before = time.time(), {pid: cpu_s(pid) for pid in everything}
        time.sleep(seconds)
        t1 = time.time()
        everything |= set().union(*({p.pid} | descendants(p.pid) for p, _ in procs))
        after = {pid: cpu_s(pid) for pid in everything}
        roles = {pid: ("actor" if pid in actors.values() else "learner" if pid == learner else
                       "hub" if cmdline(pid).startswith("ray::Hub") else "rest") for pid in after}
        load_after = load_avg()
    finally:
        codes = [stop(p, group=True) for p, _ in procs]
    used: dict[str, float] = {}
    for pid, role in roles.items():
        if after[pid] is not None:
            used[role] = used.get(role, 0.0) + after[pid] - (before.get(pid) or 0.0)
    span = t1 - t0
    chunks = [(name, info, (logdir / "replay" / name).stat())
              for name, info in list_chunks(logdir / "replay").items()]
    landed = [(name, info, st) for name, info, st in chunks if t0 <= st.st_mtime < t1]
    delivery = [st.st_mtime - float(load_chunk((logdir / "replay" / name).read_bytes(),
                                               info.length)["tick_time"].max())
                for name, info, st in landed]
    cadence = {}
    for k in actors:
        ticks = read_ticks(logdir / "replay", str(k))
        keep = (ticks["tick_time"] >= t0) & (ticks["tick_time"] < t1)
        cadence[k] = tick_stats({key: v[keep] for key, v in ticks.items()}, HZ, 0.5)
    steps = sum(info.length for _, info, _ in landed)
    return {
        "transport": transport, "actors": n, "seconds": span, "codes": codes,
        "load": f"{load_before} / {load_after}",
        "ingest": steps / span, "chunks": len(landed), "steps": steps,
        "bytes": sum(st.st_size for _, _, st in landed),
        "delivery_p50": float(np.percentile(delivery, 50)) if delivery else float("nan"),
        "delivery_max": max(delivery, default=float("nan")),
        "late": sum(c.get("late", 0) for c in cadence.values()),
        "ticks": sum(c.get("ticks", 0) for c in cadence.values()),
        "max_gap_periods": max((c.get("max_gap_periods", 0.0) for c in cadence.values()), default=0.0),
        "cpu": {role: 100 * s / span for role, s in used.items()},
    }


def table(rows: list[dict]) -> str:
    head = ("| transport | actors | ingest steps/s | chunks | delivery p50 / max s | late ticks | "
            "max gap (periods) | CPU % per actor | learner CPU % | Hub CPU % | rest of Ray CPU % | "
            "load 1m before / after |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cpu = r["cpu"]
        lines.append(
            f"| {r['transport']} | {r['actors']} | {r['ingest']:.2f} | {r['chunks']} | "
            f"{r['delivery_p50']:.3f} / {r['delivery_max']:.3f} | {r['late']} of {r['ticks']} | "
            f"{r['max_gap_periods']:.2f} | {cpu.get('actor', 0) / r['actors']:.1f} | "
            f"{cpu.get('learner', 0):.1f} | "
            + (f"{cpu.get('hub', 0):.1f} | {cpu.get('rest', 0):.1f}" if r["transport"] == "ray"
               else f"- | {cpu.get('rest', 0):.1f}")
            + f" | {r['load']} |")
    return "\n".join(lines)


def comparison(rows: list[dict]) -> str:
    """Per actor count: ray / file ingest, transport CPU per actor; and the per-chunk costs."""
    out = []
    by = {(r["transport"], r["actors"]): r for r in rows}
    for n in sorted({r["actors"] for r in rows}):
        f, r = by.get(("file", n)), by.get(("ray", n))
        if not (f and r):
            continue
        ray_cpu = sum(v for k, v in r["cpu"].items() if k != "learner") / n
        file_cpu = sum(v for k, v in f["cpu"].items() if k != "learner") / n
        extra_actor = (r["cpu"].get("actor", 0) - f["cpu"].get("actor", 0)) / n
        per_actor_chunks = r["chunks"] / n / r["seconds"]
        out.append(
            f"{n} actor(s): ray / file ingest = {r['ingest']:.2f} / {f['ingest']:.2f} = "
            f"{r['ingest'] / f['ingest']:.3f}x; transport CPU per actor (actors + Hub + rest of Ray, "
            f"per actor, minus file's actors + rest, per actor) = {ray_cpu:.1f} - {file_cpu:.1f} = "
            f"{ray_cpu - file_cpu:.1f} % of a core; of it in the actor process {extra_actor:.1f} %")
        if r["chunks"] and r["steps"] and f["chunks"]:
            def ms(row, role):  # CPU ms of `role` per chunk landed
                return 10 * row["cpu"].get(role, 0) * row["seconds"] / row["chunks"]
            out.append(
                f"    per chunk ({r['steps'] / r['chunks']:.1f} steps, {r['bytes'] / r['chunks'] / 1e3:.1f}"
                f" kB, {r['bytes'] / r['steps']:.0f} B/step): Hub {ms(r, 'hub'):.2f} ms CPU, the "
                f"actor's extra {10 * extra_actor / max(per_actor_chunks, 1e-9):.2f} ms, the "
                f"learner's refresh {ms(r, 'learner'):.2f} (ray) / {ms(f, 'learner'):.2f} (file) ms; "
                f"the rest of Ray {r['cpu'].get('rest', 0):.1f} % of a core in all (not per chunk); "
                f"at {HZ:g} Hz one actor ships {r['bytes'] / r['steps'] * HZ / 1e3:.1f} kB/s")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--seconds", type=float, default=40.0, help="measured window per condition")
    p.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--transports", nargs="+", default=["file", "ray"], choices=["file", "ray"])
    p.add_argument("--chunk-seconds", type=float, default=2.0,
                   help="replay.chunk_seconds: an actor's chunk is flushed at least this often")
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "logdir" / "bench_ray_scaleout")
    p.add_argument("--json", type=pathlib.Path, help="also write the rows here")
    p.add_argument("--configs", nargs="+", default=["catcher"], help="presets (default catcher)")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:
        args.seconds, args.actors, args.chunk_seconds = 3.0, [1], 1.0
        args.configs, args.out = [*args.configs, "debug"], smoke_dir("ray_scaleout")
    rows = []
    for n in args.actors:
        for transport in args.transports:  # side by side at each actor count
            print(f"{transport}, {n} actor(s): {args.seconds:g} s ...", flush=True)
            row = run_condition(transport, n, args.seconds, args.chunk_seconds,
                                args.out / f"{transport}{n}", args.configs)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print()
    print(f"{os.cpu_count()} cores; {HZ:g} Hz, 64x64 RGB, chunks every {args.chunk_seconds:g} s; "
          f"{args.seconds:g} s per condition")
    print(table(rows))
    print()
    print(comparison(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    failed = [f"{r['transport']}{r['actors']}" for r in rows if any(r["codes"])]
    if failed:
        print(f"processes exited with an error status in: {', '.join(failed)} (codes in the rows above)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the game keep getting inputs while the agent learns? Tick cadence of the actor under six conditions.

    .venv/bin/python bench/cadence.py --seconds 120 --rates 15 60 [--preset catcher] [--out DIR]
    .venv/bin/python bench/cadence.py --smoke      # 3 s of alone, learner and sync at 60 Hz, debug preset

For each tick rate, the actor (python -m dreamer_live.actor, a real process) plays the real-time built-in
game for --seconds under:
  alone      no learner
  learner    python -m dreamer_live.learner training at full speed (--run.train_ratio 0) on the same
             machine, with its default manners (nice +learner.nice, Linux's idle priority, every core
             at actor ticks up to 25 Hz, every core but core 0 above: process.learner_threads)
  allcores   the same on every core whatever the tick rate (--learner.threads 1024)
  learner1core  every core but core 0 at nice +learner.nice only (the manners before the learner took
             every core: --learner.threads -1 --learner.idle false)
  publish1s  the same, publishing every second (--run.publish_every 1) and the actor polling every
             second (--actor.param_interval 1): a parameter swap every second, the worst case
  sync       bench/sync_trainer.py: collect N steps, train M updates in the same process, repeat
In the learner conditions a first short actor run fills replay, the learner starts and compiles, and the
measured actor (actor.id 1) starts once the learner logs its first updates; the learner is stopped after.

Timing comes from the replay chunks the actor writes: every step carries tick_time (wall time the tick
began, right before observe -> policy -> act) and tick_late_ms (how late it began against the tick grid).
Printed per condition:
  late        ticks that began more than 10% of the period after their deadline
  p50/p99/max lateness in ms
  max gap     longest time between two consecutive ticks (= two actions sent), s and in periods; the gap
              into an episode's first tick is its reset, not play, and counts nowhere (nor in the time)
  released %  fraction of game time with no input: the game (GameEnv) releases every key when no action
              came for release_after s, so this is sum(max(0, gap - release_after)) / total time
  stale %     sum(max(0, gap - period)) / total: time the agent was later than one period to decide
and, for the sync loop, the game overs the game reported at the first tick after a pause longer than
release_after (the game ended while nobody was playing) and a lower bound on the lives lost in pauses
(Catcher: -1 per fruit missed; the net negative reward of the first tick after each pause).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from smoke import add_smoke, smoke_dir  # noqa: E402

from dreamer_live.pacer import late_limit_ms  # noqa: E402
from dreamer_live.replay.chunk import list_chunks, load_chunk  # noqa: E402

CONDITIONS = ("alone", "learner", "allcores", "learner1core", "publish1s", "sync")
TICK_FIELDS = ("tick_time", "tick_late_ms", "reward", "is_first", "is_last", "is_terminal")


def release_after() -> float:
    """Seconds without an action after which a real-time built-in game releases the keys."""
    from dreamer_live.envs.games.base import GameEnv

    return float(inspect.signature(GameEnv.__init__).parameters["release_after"].default)


def read_ticks(replay_dir: pathlib.Path, writer_id: str) -> dict[str, np.ndarray]:
    """Per-step tick fields of one writer's streams, in time order (from the chunk files)."""
    chunks = sorted((f.time, f.stream, f.seq, name) for name, f in list_chunks(replay_dir).items()
                    if f.stream.split("_")[0] == str(writer_id))
    parts: dict[str, list[np.ndarray]] = {k: [] for k in TICK_FIELDS}
    for _, _, _, name in chunks:
        length = list_chunks(replay_dir)[name].length
        arrays = load_chunk((replay_dir / name).read_bytes(), length)
        for k in TICK_FIELDS:
            parts[k].append(arrays[k])
    if not parts["tick_time"]:
        return {k: np.zeros(0) for k in TICK_FIELDS}
    out = {k: np.concatenate(v) for k, v in parts.items()}
    order = np.argsort(out["tick_time"], kind="stable")
    return {k: v[order] for k, v in out.items()}


def tick_stats(ticks: dict[str, np.ndarray], hz: float, release_s: float) -> dict:
    """Cadence figures of one run's ticks (see the module docstring for the definitions)."""
    period = 1.0 / hz
    t, late = ticks["tick_time"], ticks["tick_late_ms"].astype(np.float64)
    if len(t) < 2:
        return {"ticks": len(t)}
    # The gap into an episode's first tick is its reset, not play (the actor restarts its clock there).
    play = ~ticks["is_first"][1:].astype(bool)
    gaps = np.diff(t)[play]
    if not len(gaps):
        return {"ticks": len(t)}
    total = float(gaps.sum())
    # A game over that comes right after a pause: the game ended while nobody was playing.
    after_pause = np.concatenate([[False], np.diff(t) > release_s]) & np.concatenate([[False], play])
    return {
        "ticks": int(len(t)), "seconds": float(total), "ticks_per_s": float(len(gaps) / total),
        "late": int((late > late_limit_ms(hz)).sum()),
        "late_p50": float(np.percentile(late, 50)), "late_p99": float(np.percentile(late, 99)),
        "late_max": float(late.max()),
        "max_gap_s": float(gaps.max()), "max_gap_periods": float(gaps.max() / period),
        "released_frac": float(np.clip(gaps - release_s, 0, None).sum() / total),
        "stale_frac": float(np.clip(gaps - period, 0, None).sum() / total),
        "pauses": int((gaps > release_s).sum()),
        # rewards are summed between observations: the first one after a pause holds the pause's net
        # reward; catches by the idle paddle can hide misses, so this is a lower bound
        "misses_in_pauses": int(-ticks["reward"][after_pause & (ticks["reward"] < 0)].sum()),
        "gameovers_in_pauses": int((ticks["is_terminal"].astype(bool) & after_pause).sum()),
        "episodes": int(ticks["is_last"].astype(bool).sum()),
    }


def load_avg() -> str:
    """The 1-minute load average (2 cores: > 2 means other work was queued for the CPU)."""
    return f"{os.getloadavg()[0]:.2f}"


def start(cmd: list[str], log: pathlib.Path) -> subprocess.Popen:
    """Start a child with its output in `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    f = log.open("ab")
    return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def stop(proc: subprocess.Popen, grace: float = 120.0, after: float = 0.0, group: bool = False) -> int:
    """Let a child run up to `after` s, then SIGINT (a user's Ctrl-C; to its process group with
    `group`), SIGKILL after `grace` s more; return the exit status. Stopped meanwhile (Ctrl-C or
    SIGTERM), the caller stops the child the same way first, then raises: a child in a session of its
    own would otherwise play on."""
    send = (lambda sig: os.killpg(proc.pid, sig)) if group else proc.send_signal
    interrupted = None
    try:
        return proc.wait(timeout=after)
    except subprocess.TimeoutExpired:
        pass
    except KeyboardInterrupt as e:
        interrupted = e
    send(signal.SIGINT)
    try:
        code = proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        code = proc.wait()
    if interrupted:
        raise interrupted
    return code


def wait_ok(proc: subprocess.Popen, timeout: float, what: str, log: pathlib.Path) -> None:
    """Wait for a child that ends by itself; raise with its log tail if it fails."""
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise RuntimeError(f"{what} did not finish in {timeout:.0f}s; see {log}")
    if code != 0:
        raise RuntimeError(f"{what} exited with {code}: {log.read_text()[-2000:]}")


def learner_training(logdir: pathlib.Path) -> bool:
    """Whether the learner has logged a metrics line with updates done."""
    path = logdir / "metrics.jsonl"
    if not path.exists():
        return False
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("source") == "learner" and "learner/updates_per_s" in r and r.get("step", 0) > 0:
            return True
    return False


def learner_rate(logdir: pathlib.Path, since: float = 0.0) -> float:
    """Learner updates per second from its metric lines after `since` (unix s): step and time deltas.

    (Not the mean of learner/updates_per_s: with JAX's async dispatch updates are counted when queued,
    so single windows swing between bursts and near zero; the step count over time is exact.)"""
    from dreamer_live.metrics import read_lines

    lines = [(r["time"], r["step"]) for r in read_lines(logdir / "metrics.jsonl", "learner")
             if "learner/updates_per_s" in r and r.get("step", 0) > 0 and r["time"] >= since]
    if len(lines) < 2:
        return float("nan")
    return (lines[-1][1] - lines[0][1]) / (lines[-1][0] - lines[0][0])


def run_condition(condition: str, hz: float, seconds: float, presets: list[str], logdir: pathlib.Path,
                  collect: int) -> tuple[dict, dict]:
    """Run one condition; return (its tick stats, extra notes)."""
    py = sys.executable
    base = ["--logdir", str(logdir), "--configs", *presets, "--actor.hz", str(hz), "--run.quiet", "true",
            "--run.prefill", "64", "--run.log_every", "1"]
    notes: dict = {"load_before": load_avg()}
    actor_cmd = [py, "-m", "dreamer_live.actor", *base]
    timeout = seconds + 300
    if condition == "alone":
        proc = start([*actor_cmd, "--actor.id", "1", "--actor.duration", str(seconds)], logdir / "actor.log")
        wait_ok(proc, timeout, "actor", logdir / "actor.log")
        writer = "1"
    elif condition in ("learner", "allcores", "learner1core", "publish1s"):
        fill = start([*actor_cmd, "--actor.duration", str(max(6.0, 160.0 / hz))], logdir / "fill.log")
        wait_ok(fill, timeout, "prefill actor", logdir / "fill.log")
        extra = ["--run.train_ratio", "0"]
        actor_extra = []
        if condition == "allcores":
            extra += ["--learner.threads", "1024"]
        if condition == "learner1core":
            extra += ["--learner.threads", "-1", "--learner.idle", "false"]
        if condition == "publish1s":
            extra += ["--run.publish_every", "1"]
            actor_extra = ["--actor.param_interval", "1"]
        learner = start([py, "-m", "dreamer_live.learner", *base, *extra], logdir / "learner.log")
        try:
            began = time.monotonic()
            while not learner_training(logdir):
                if learner.poll() is not None:
                    raise RuntimeError(f"learner exited: {(logdir / 'learner.log').read_text()[-2000:]}")
                if time.monotonic() - began > 600:
                    raise RuntimeError(f"learner not training after 600s; see {logdir / 'learner.log'}")
                time.sleep(0.5)
            notes["learner_ready_s"] = time.monotonic() - began
            proc = start([*actor_cmd, *extra, *actor_extra, "--actor.id", "1",
                          "--actor.duration", str(seconds)], logdir / "actor.log")
            wait_ok(proc, timeout, "actor", logdir / "actor.log")
        finally:
            notes["learner_exit"] = stop(learner)
        writer = "1"
    elif condition == "sync":
        proc = start([py, str(ROOT / "bench" / "sync_trainer.py"), *base, "--seconds", str(seconds),
                      "--collect", str(collect)], logdir / "sync.log")
        wait_ok(proc, timeout + 300, "sync trainer", logdir / "sync.log")
        writer = "sync"
    else:
        raise ValueError(condition)
    notes["load_after"] = load_avg()
    (logdir / "notes.json").write_text(json.dumps({**notes, "writer": writer}))
    return analyse(logdir, hz)


def analyse(logdir: pathlib.Path, hz: float) -> tuple[dict, dict]:
    """Tick stats of a finished condition's folder, and its notes (loads, learner rate)."""
    notes = json.loads((logdir / "notes.json").read_text())
    ticks = read_ticks(logdir / "replay", notes["writer"])
    if len(ticks["tick_time"]) and notes["writer"] == "1":
        rate = learner_rate(logdir, since=float(ticks["tick_time"][0]))
        if np.isfinite(rate):
            notes["updates_per_s"] = rate
    return tick_stats(ticks, hz, release_after()), notes


def table(rows: list[tuple[float, str, dict, dict]], release_s: float) -> str:
    """The results as a Markdown table."""
    head = ("| Hz | condition | ticks | late (>10% period) | lateness p50 / p99 / max ms | max gap s "
            "(periods) | keys released % | stale % | learner upd/s | load 1m before/after |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for hz, cond, s, n in rows:
        if s.get("ticks", 0) < 2:
            lines.append(f"| {hz:g} | {cond} | {s.get('ticks', 0)} | no data | | | | | | |")
            continue
        rate = n.get("updates_per_s")
        lines.append(
            f"| {hz:g} | {cond} | {s['ticks']} | {s['late']} ({100 * s['late'] / s['ticks']:.2f}%) | "
            f"{s['late_p50']:.2f} / {s['late_p99']:.2f} / {s['late_max']:.1f} | "
            f"{s['max_gap_s']:.3f} ({s['max_gap_periods']:.2f}) | {100 * s['released_frac']:.2f} | "
            f"{100 * s['stale_frac']:.2f} | {'' if rate is None else f'{rate:.2f}'} | "
            f"{n['load_before']} / {n['load_after']} |")
    return "\n".join(lines)


def notes_of(rows, hz: float, condition: str) -> dict:
    """The notes of one condition's row."""
    return next(n for h, c, _, n in rows if h == hz and c == condition)


def main(argv: list[str] | None = None) -> int:
    """Run the conditions at each rate and print the table and the comparison."""
    p = argparse.ArgumentParser(prog="bench/cadence.py", description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=120.0, help="measured seconds per condition")
    p.add_argument("--rates", type=float, nargs="+", default=[15.0, 60.0], help="actor tick rates (Hz)")
    p.add_argument("--preset", nargs="+", default=["catcher"], help="config presets (default catcher)")
    p.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    p.add_argument("--collect", type=int, default=256, help="sync loop: env steps per collect phase")
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("/tmp/dreamer_live_bench/cadence"),
                   help="where the runs' logdirs go (replaced unless --analyse)")
    p.add_argument("--analyse", action="store_true", help="only re-analyse the run folders in --out")
    add_smoke(p)
    args = p.parse_args(argv)
    if args.smoke:  # one condition of each kind (the learner ones differ only in flags)
        args.seconds, args.rates, args.conditions = 3.0, [60.0], ["alone", "learner", "sync"]
        args.preset, args.out = [*args.preset, "debug"], smoke_dir("cadence")
    release_s = release_after()
    if not args.analyse:
        shutil.rmtree(args.out, ignore_errors=True)
    print(f"cadence: writing run folders under {args.out}; {args.seconds:g}s per condition; game releases "
          f"keys after {release_s:g}s without input; {os.cpu_count()} CPUs", flush=True)
    rows, failed = [], 0
    for hz in args.rates:
        for cond in args.conditions:
            logdir = args.out / f"{hz:g}hz-{cond}"
            if args.analyse:
                if (logdir / "notes.json").exists():
                    rows.append((hz, cond, *analyse(logdir, hz)))
                continue
            print(f"cadence: {hz:g} Hz, {cond} ... (load {load_avg()})", flush=True)
            try:
                stats, notes = run_condition(cond, hz, args.seconds, args.preset, logdir, args.collect)
            except RuntimeError as e:
                print(f"cadence: {hz:g} Hz {cond} failed: {e}", flush=True)
                failed += 1
                stats, notes = {"ticks": 0}, {"load_before": "", "load_after": load_avg()}
            rows.append((hz, cond, stats, notes))
            print(f"cadence:   {json.dumps({**stats, **notes}, default=str)}", flush=True)
    print()
    print(table(rows, release_s))
    print()
    for hz in args.rates:
        got = {c: s for h, c, s, _ in rows if h == hz and s.get("ticks", 0) >= 2}
        period = 1.0 / hz
        if "learner" in got:
            s = got["learner"]
            gap_ok = s["max_gap_s"] <= 1.5 * period
            p99_ok = s["late_p99"] < late_limit_ms(hz)
            print(f"{hz:g} Hz, learner at full speed: longest input gap {s['max_gap_periods']:.2f} periods "
                  f"(target <= 1.5: {'met' if gap_ok else 'MISSED'}), p99 lateness "
                  f"{s['late_p99']:.2f} ms = {s['late_p99'] / (10 * period):.1f}% of the period "
                  f"(target < 10%: {'met' if p99_ok else 'MISSED'})")
        rates = {c: notes_of(rows, hz, c).get("updates_per_s", float("nan"))
                 for c in ("learner", "allcores", "learner1core") if c in got}
        if len(rates) > 1:
            print(f"{hz:g} Hz, learner updates/s beside the actor: "
                  + ", ".join(f"{c} {r:.2f}" for c, r in rates.items()))
        if "sync" in got and "learner" in got:
            a, b = got["sync"], got["learner"]
            print(f"{hz:g} Hz, sync loop vs decoupled learner: longest gap {a['max_gap_s']:.2f}s vs "
                  f"{b['max_gap_s']:.3f}s ({a['max_gap_s'] / b['max_gap_s']:.0f}x); keys released "
                  f"{100 * a['released_frac']:.1f}% vs {100 * b['released_frac']:.2f}% of game time; "
                  f"at least {a['misses_in_pauses']} lives lost and {a['gameovers_in_pauses']} game overs "
                  f"during pauses vs {b['misses_in_pauses']} and {b['gameovers_in_pauses']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

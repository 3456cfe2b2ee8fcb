"""A slower CPU on this machine: run a command while a real-time process on each core takes a share of it.

    .venv/bin/python bench/slow_cpu.py --share 0.45 -- make test     # each core at ~0.55x its speed
    .venv/bin/python bench/slow_cpu.py --smoke                       # seconds: yardsticks, a tiny command

Targets are set for slow 2-core machines (matmul 120-214 GFLOP/s) that a faster machine cannot show.
This stands one in: a SCHED_FIFO process pinned to each core spins for `share` of every `--period-ms`
and sleeps the rest, so every thread the command runs gets at most 1 - share of its core, whatever
its priority (nice, SCHED_IDLE) or how many threads run, while sleeps, timers and real-time games keep
the wall clock's pace, as on a slower CPU. What it does not copy: a slower machine's caches and memory
(the command keeps this machine's) and the stalls of a shared core (two hyperthreads).

Prints the measured slow-down first, alone and with the thieves, on two yardsticks: a float32 matmul
of 2048 (GFLOP/s of both cores, as the docs give each machine) and one Python thread's loop rate; then
runs the command and prints its exit status, wall seconds and user+sys CPU (its waited descendants
included, the thieves not). Exits with the command's status. Linux only; real-time priority needs root
or CAP_SYS_NICE (without it: one line, exit status 2; --smoke prints SKIPPED).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing
import os
import shlex
import subprocess
import sys
import time

from smoke import add_smoke, skip

RT_PRIORITY = 1  # the lowest real-time priority: above every normal and idle thread


def next_period(period: float) -> float:
    """The next whole multiple of `period` s on the monotonic clock."""
    return math.ceil(time.monotonic() / period) * period


def steal(cpu: int, share: float, period: float, parent: int) -> None:
    """On core `cpu` at real-time priority: spin `share` of every `period` s, sleep the rest; end
    with the parent. The periods start at whole multiples of `period` on the monotonic clock, so
    every core is taken at the same moments: threads that wait on each other (a matmul's) lose the
    share once, as on a uniformly slower CPU, not once per core."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    tick = next_period(period)
    try:
        while os.getppid() == parent:
            rest = tick - time.monotonic()
            if rest > 0:
                time.sleep(rest)
            busy_until = tick + share * period
            while time.monotonic() < busy_until:
                pass
            tick += period
            if tick < time.monotonic():
                tick = next_period(period)  # fell behind (real-time throttling): the next period
    except KeyboardInterrupt:
        pass


@contextlib.contextmanager
def thieves(share: float, period: float):
    """One `steal` process per core this process may run on, while inside `with`."""
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=steal, args=(cpu, share, period, os.getpid()), daemon=True)
             for cpu in sorted(os.sched_getaffinity(0))]
    for proc in procs:
        proc.start()
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join()


def realtime_allowed() -> bool:
    """Whether this process may take real-time priority (tried on itself, then undone)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    except OSError:  # EPERM without the privilege; EPERM or EINVAL in a container with no real-time budget
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def loop_rate(seconds: float) -> float:
    """Iterations per second of a plain Python loop on one thread."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(1000):
            pass
        n += 1000
    return n / seconds


def yardsticks(reps: int, seconds: float) -> tuple[float, float]:
    """(matmul GFLOP/s, Python loops/s) on this CPU as it is now."""
    from learner_throughput import matmul_gflops

    return matmul_gflops(reps=reps), loop_rate(seconds)


def run(command: list[str]) -> tuple[int, float, float]:
    """Run `command`; (exit status, wall s, user+sys s of it and its waited descendants)."""
    began = time.monotonic()
    proc = subprocess.Popen(command)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), time.monotonic() - began, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--share", type=float, default=0.45,
                   help="fraction of each core taken (0 to 0.9; the kernel keeps 5%% of each second "
                        "from real-time threads)")
    p.add_argument("--period-ms", type=float, default=10.0, help="length of one spin-and-sleep cycle")
    add_smoke(p)
    p.add_argument("command", nargs="*", help="the command to run on the slower CPU (after --)")
    args = p.parse_args(argv)
    if not 0 < args.share <= 0.9 or args.period_ms <= 0:
        print(f"slow_cpu: --share must be in (0, 0.9] and --period-ms > 0, not {args.share} and "
              f"{args.period_ms}", file=sys.stderr)
        return 2
    if args.smoke:
        args.command = [sys.executable, "-c", "sum(range(10 ** 6))"]
    elif not args.command:
        print("slow_cpu: no command given (bench/slow_cpu.py -- COMMAND ...)", file=sys.stderr)
        return 2
    if not sys.platform.startswith("linux") or not realtime_allowed():
        reason = "real-time priority (SCHED_FIFO) is not allowed here: run as root or with CAP_SYS_NICE"
        if args.smoke:
            return skip("slow_cpu", reason)
        print(f"slow_cpu: {reason}", file=sys.stderr)
        return 2
    reps, seconds = (2, 0.2) if args.smoke else (10, 1.0)
    cores = len(os.sched_getaffinity(0))
    print(f"slow_cpu: {cores} cores, a real-time process on each takes {args.share:.0%} of every "
          f"{args.period_ms:g} ms", flush=True)
    gflops, loops = yardsticks(reps, seconds)
    with thieves(args.share, args.period_ms / 1000):
        slow_gflops, slow_loops = yardsticks(reps, seconds)
        print(f"  matmul float32 2048: {gflops:.0f} GFLOP/s alone, {slow_gflops:.0f} with it "
              f"({slow_gflops / gflops:.2f}x)\n"
              f"  one Python thread: {loops / 1e6:.1f} M loops/s alone, {slow_loops / 1e6:.1f} M with it "
              f"({slow_loops / loops:.2f}x)", flush=True)
        print(f"slow_cpu: running {shlex.join(args.command)}", flush=True)
        status, wall, cpu = run(args.command)
    print(f"slow_cpu: {shlex.join(args.command)} exited {status} after {wall:.1f} s wall, "
          f"{cpu / 60:.1f} min user+sys (the thieves' share not counted)", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

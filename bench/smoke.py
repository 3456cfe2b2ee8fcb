"""Every benchmark's --smoke mode, a few at a time: does each bench still run?

    .venv/bin/python bench/smoke.py [NAME ...] [--jobs N] [--timeout 600] [--verbose]   (make bench-smoke)

A bench is a bench/*.py file with a `__main__` entry point (not this one); modules that other benches
only import have none. Each runs as `bench/NAME.py --smoke`: the same code as the real bench (real
processes, real games, the figures and the comparison printed) at tiny sizes and durations, its scratch
files in a temporary folder. It passes when it exits 0; the figures are not checked (it is no speed
test), so several run at once (--jobs; by default 1.5 per core, as the test suite's workers: the
smokes wait on real-time games and child processes much of the time). A bench that needs what this
machine lacks (Xvfb, SuperTux) prints one line starting with SKIPPED, exits 0 and shows as "PASS
(skipped: ...)". Prints per bench, as each ends, its name, seconds and PASS or FAIL (a failure with its
output's last lines), then `N passed, M failed`; exits 1 when any failed. Ctrl-C stops every bench
still running.
The benches compile as the tests do (`cli.quick_compile`: fast compiles, slower steps), since a smoke
run's figures are not kept.

Also the benches' shared --smoke helpers: add_smoke (the flag), smoke_dir (a scratch folder), skip.
"""

from __future__ import annotations

import argparse
import atexit
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from dreamer_live import cli
from dreamer_live.process import waiting_jobs

BENCH = pathlib.Path(__file__).resolve().parent
ROOT = BENCH.parent
SKIPPED = "SKIPPED "  # the line a bench prints when its smoke run cannot run here
SMOKE_HELP = ("run for seconds at tiny sizes through the same code (scratch files in a temporary folder): "
              "checks that the bench works, its figures mean nothing; bench/smoke.py runs them all")
TAIL_LINES = 40  # lines of a failed bench's output printed
RUNNING: set[int] = set()  # process groups of the benches running now
# Started first so that the longest smokes do not end the run alone (Xeon, 2026-11-28, three at once:
# learner_throughput 194 s, ray_scaleout 111 s, live_run 86 s, cadence 72 s; the rest under a minute).
LONGEST = ("learner_throughput", "ray_scaleout", "live_run", "cadence")


def add_smoke(p: argparse.ArgumentParser) -> None:
    """The --smoke flag of a bench's argument parser."""
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def smoke_dir(name: str) -> pathlib.Path:
    """A scratch folder for a --smoke run, removed when this process exits."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=f"dreamer_live_smoke_{name}_"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def skip(name: str, reason: str) -> int:
    """Say in one line why a smoke run cannot run here; its exit status (0)."""
    print(f"{SKIPPED}{name} --smoke: {reason}", flush=True)
    return 0


def benches() -> list[str]:
    """Names of the bench/*.py files with a __main__ entry point, this runner aside."""
    return sorted(path.stem for path in BENCH.glob("*.py") if path.name != pathlib.Path(__file__).name
                  and 'if __name__ == "__main__":' in path.read_text())


def run(name: str, timeout: float, verbose: bool) -> tuple[bool, float, str]:
    """Run one bench's --smoke in its own process group; (passed, seconds, note)."""
    with tempfile.TemporaryFile("w+") as log:
        began = time.monotonic()
        proc = subprocess.Popen([sys.executable, str(BENCH / f"{name}.py"), "--smoke"], cwd=ROOT,
                                stdout=None if verbose else log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        RUNNING.add(proc.pid)
        note = ""
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code, note = None, f"not done in {timeout:.0f} s"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # a hang, or children the bench left behind
            except ProcessLookupError:
                pass
            proc.wait()
            RUNNING.discard(proc.pid)
        seconds = time.monotonic() - began
        log.seek(0)
        lines = log.read().splitlines()
    passed = code == 0
    if code not in (0, None):
        note = f"exit status {code}"
    skipped = [line for line in lines if line.startswith(SKIPPED)]
    if passed and skipped:
        note = "skipped: " + skipped[0][len(SKIPPED):]
    if not passed and lines:
        print("\n".join(f"    {line}" for line in lines[-TAIL_LINES:]), flush=True)
    return passed, seconds, note


def main(argv: list[str] | None = None) -> int:
    """Run the benches' smoke modes --jobs at a time, longest first; print each result and the totals."""
    names = benches()
    p = argparse.ArgumentParser(prog="bench/smoke.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    p.add_argument("names", nargs="*", metavar="NAME", help=f"benches to run (default all: {' '.join(names)})")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per bench (default 600)")
    p.add_argument("--jobs", type=int, default=waiting_jobs(),
                   help=f"benches run at once (default {waiting_jobs()}: 1.5 per core)")
    p.add_argument("--verbose", action="store_true", help="show every bench's output as it runs")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs: expected 1 or more, got {args.jobs}")
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        p.error(f"no bench named {', '.join(unknown)} (benches: {' '.join(names)})")
    cli.quick_compile()
    # Children get Ctrl-C's default action even when this runs in the background of a script.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    results = []
    pool = ThreadPoolExecutor(args.jobs)
    try:
        chosen = sorted(args.names or names, key=lambda n: LONGEST.index(n) if n in LONGEST else len(LONGEST))
        running = {pool.submit(run, name, args.timeout, args.verbose): name for name in chosen}
        print(f"{len(running)} benches, {args.jobs} at a time ...", flush=True)
        for done in as_completed(running):
            passed, seconds, note = done.result()
            results.append(passed)
            print(f"{running[done]:<20} {seconds:6.1f} s  {'PASS' if passed else 'FAIL'}"
                  f"{f' ({note})' if note else ''}", flush=True)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        for group in list(RUNNING):
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise
    pool.shutdown()
    print(f"{results.count(True)} passed, {results.count(False)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

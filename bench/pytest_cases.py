"""Benches whose cases are tests: run a list of pytest tests, each under a time limit, and tabulate them.

bench/hostile_inputs.py (issue 17) and bench/faults.py (issue 33) are a CASES list and their columns on
top of this. `run` starts pytest once on the selected tests, in a temporary folder, with this module as
a plugin: its `pytest_runtest_logreport` hook appends one JSON line per test outcome (id, outcome,
message, seconds, and the figures the test recorded with pytest's `record_property` fixture) to the
file RESULTS_ENV names. `observed` turns a case's tests into one verdict cell, `properties` reads their
recorded figures, and `print_table` prints the Markdown table. Scratch paths in the cells read TMP.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

from smoke import add_smoke

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS_ENV = "PYTEST_CASES_RESULTS"  # where the plugin half of this file appends one line a test
TMP = "TMP"  # what a test's own temporary folder reads as in the table


def pytest_runtest_logreport(report) -> None:
    """pytest hook (this file is also the plugin): one JSON line per test outcome."""
    if report.when != "call" and report.passed:
        return  # set-up and tear-down that passed say nothing
    if report.skipped:
        message = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    elif report.failed:
        lines = [line for line in report.longreprtext.splitlines() if line.startswith("E ")]
        message = (lines or report.longreprtext.splitlines()[-1:] or ["failed"])[0][:200]
    else:
        message = ""
    recorded = [[name, value if isinstance(value, (int, float, str)) else str(value)]
                for name, value in report.user_properties]
    with open(os.environ[RESULTS_ENV], "a") as f:
        f.write(json.dumps({"id": report.nodeid, "outcome": report.outcome, "message": message,
                            "seconds": report.duration, "properties": recorded}) + "\n")


def add_arguments(p: argparse.ArgumentParser, per_case_s: float = 300.0, total_s: float = 1800.0) -> None:
    """The flags every such bench has: -k, --per-case-s, --total-s and --smoke."""
    p.add_argument("-k", default="", help="run only the tests pytest's -k selects")
    p.add_argument("--per-case-s", type=float, default=per_case_s, help="time limit of each test")
    p.add_argument("--total-s", type=float, default=total_s, help="time limit of the whole run")
    add_smoke(p)


@dataclasses.dataclass
class Run:
    results: dict[str, dict]  # test id -> its JSON line
    seconds: float
    broken: bool  # pytest could not run the tests (not: a test failed)

    def failed(self, verdicts: list[str]) -> bool:
        """Whether the bench exits 1: pytest broke, no test ran, or a case went otherwise."""
        return self.broken or not self.results or any(v.startswith("NOT") for v in verdicts)


def run(tests: list[str], k: str, per_case_s: float, total_s: float, prefix: str) -> Run:
    """Run `tests` (pytest node ids; -k `k` selects among them) in a temporary folder, each under
    `per_case_s` and all under `total_s` (then killed with every process below, the rest 'not run').
    When a test fails, pytest's output is kept in a file outside that folder and its path printed."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        results_path, basetemp = pathlib.Path(tmp) / "results.jsonl", pathlib.Path(tmp) / "t"
        results_path.touch()
        env = dict(os.environ, **{RESULTS_ENV: str(results_path), "JAX_PLATFORMS": "cpu"},
                   PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench"),
                                               os.environ.get("PYTHONPATH", "")]))
        command = [sys.executable, "-m", "pytest", "-q", "-p", __name__, "-p", "no:cacheprovider",
                   "--basetemp", str(basetemp), "--timeout", str(per_case_s),
                   *(["-k", k] if k else []), *tests]
        began = time.monotonic()
        with open(pathlib.Path(tmp) / "pytest.txt", "w+") as log:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                proc.wait(total_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its children (actors, learners) too
                proc.wait()
                print(f"stopped at the time limit ({total_s:.0f} s); cases not reached: 'not run'")
            broken = proc.returncode not in (0, 1, -signal.SIGKILL, 5)  # 5: -k selected nothing
            if broken:
                log.seek(0)
                print("pytest could not run the cases:\n" + "".join(log.readlines()[-15:]))
            scratch = re.compile(re.escape(str(basetemp.resolve())) + r"/[^/\s'\"]+|" +
                                 re.escape(str(basetemp)) + r"/[^/\s'\"]+")
            text = scratch.sub(TMP, results_path.read_text())  # JSON-escaped paths: none on Linux
            results = {r["id"]: r for r in map(json.loads, text.splitlines())}
            if any(r["outcome"] == "failed" for r in results.values()):  # the whole story, kept
                fd, kept = tempfile.mkstemp(prefix=prefix, suffix="-pytest.txt")
                log.seek(0)
                with os.fdopen(fd, "w") as f:
                    f.write(log.read())
                print(f"pytest's output (a case went otherwise): {kept}")
    return Run(results, time.monotonic() - began, broken)


def mine(tests: list[str], results: dict[str, dict]) -> list[dict]:
    """The results of a case's tests (a parametrized test's id stands for all its parameters)."""
    return [r for nodeid, r in results.items()
            if any(nodeid == t or nodeid.startswith(t + "[") for t in tests)]


def observed(tests: list[str], results: dict[str, dict]) -> str:
    """One cell: 'as expected' with the time taken, or what went otherwise."""
    ran = mine(tests, results)
    if not ran:
        return "not run"
    bad = [r for r in ran if r["outcome"] == "failed"]
    if bad:
        return f"NOT AS EXPECTED: {bad[0]['message'].removeprefix('E ').strip()}"
    skipped = [r for r in ran if r["outcome"] == "skipped"]
    if len(skipped) == len(ran):
        return f"skipped: {skipped[0]['message']}"
    runs = len(ran) - len(skipped)
    text = f"as expected ({runs} run{'s' * (runs > 1)}, {sum(r['seconds'] for r in ran):.0f} s)"
    return text + (f"; skipped: {skipped[0]['message']}" if skipped else "")


def properties(tests: list[str], results: dict[str, dict], name: str) -> list:
    """The values a case's tests recorded under `name` (record_property), in the order recorded."""
    return [value for r in mine(tests, results) for key, value in r.get("properties", ()) if key == name]


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    """The title line, then a Markdown table (a '|' inside a cell escaped)."""
    print(title + "\n")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(cell.replace("|", r"\|") for cell in row) + " |")

"""Issue 17's hostile probe in one command: every case, what must happen, and what did.

Each case is a test under tests/ that builds the hostile file, value or condition and runs the real
actor or learner on it (tests/test_hostile.py holds most); this runs them all in a temporary folder,
each under a time limit and the whole under another, and prints a table: case, expected, observed.
The full-disk cases mount a small tmpfs and need root; elsewhere they show as skipped, with the
reason.

    .venv/bin/python bench/hostile_inputs.py [-k EXPR] [--per-case-s 300] [--total-s 1800]
    .venv/bin/python bench/hostile_inputs.py --smoke      # two quick cases: -k "zip or latest_json"
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

from smoke import add_smoke

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS_ENV = "HOSTILE_INPUTS_RESULTS"  # where the plugin half of this file appends one line a test
H, E, C = "tests/test_hostile.py::", "tests/test_cli_errors.py::", "tests/test_checkpoint.py::"
CHUNK = H + "test_a_hostile_chunk_is_quarantined_with_its_reason_and_hides_nothing"
CASES = [  # (issue item, case, expected, tests)
    ("1", "NaN parameters: learner", "non-finite updates skipped; one line after learner.max_skipped; "
     "nothing NaN published or checkpointed",
     [H + "test_learner_skips_non_finite_updates_then_stops_with_one_line"]),
    ("1", "NaN parameters: actor", "version refused, its own kept; no NaN action in replay",
     [H + "test_actor_refuses_a_non_finite_version_and_keeps_its_own"]),
    ("2", "zip bomb chunk (8e6 steps)", "quarantined before inflating", [CHUNK + "[zip bomb]"]),
    ("3", "lying chunk name (1e9 steps, year 2099)", "quarantined; every real chunk read",
     [CHUNK + "[lying name]"]),
    ("4", "foreign chunk (vector 3 wider)", "quarantined against spaces.json; real chunks stay",
     [CHUNK + "[foreign chunk]"]),
    ("5", "NaN reward, inf observation", "chunk quarantined, the reason named",
     [CHUNK + "[non-finite values]"]),
    ("2-8", "all hostile chunks at once", "learner trains on the 200 real steps",
     [H + "test_learner_trains_on_the_real_chunks_beside_every_hostile_one"]),
    ("6", "checkpoint: flipped bytes, NaN", "set aside like a truncated one; the older one loaded",
     [C + "test_flipped_bytes_or_nan_inside_a_checkpoint_set_it_aside_like_a_truncated_one"]),
    ("7", "spaces.json act.n 1e9, shape 1e5 x 1e5", "one line, exit 2, no hang",
     [H + "test_hostile_spaces_json_is_one_line_not_a_hang"]),
    ("8", "FIFO, symlink to /dev/zero as chunks", "quarantined: not a regular file",
     [CHUNK + "[fifo]", CHUNK + "[symlink to /dev/zero]"]),
    ("9", "full disk: learner", "checkpoint skipped with one line, older kept, training goes on",
     [H + "test_learner_skips_checkpoints_a_full_disk_refuses_keeps_the_older_ones_and_goes_on"]),
    ("9", "full disk: actor", "keeps playing, holds chunks (status line), writes them later; "
     "after replay.hold_s or a stop one line (time refused, steps lost and written), exit 2",
     [H + "test_actor_holds_what_a_full_disk_refuses_keeps_playing_then_stops_with_one_line"]),
    ("10-11", "16 nonsense values (--actor.hz 1e999 ...)", "one line, exit 2",
     [E + "test_nonsense_values_are_one_line_and_exit_2"]),
    ("10", "--logdir a file, read-only, no such platform", "one line, exit 2",
     [E + "test_logdir_that_is_a_file", E + "test_read_only_logdir", E + "test_platform_this_machine_lacks"]),
    ("12", "actor starved of CPU", "late = over 10% of a period, as in replay; 'too loaded'",
     [H + "test_the_actor_counts_late_ticks_as_its_replay_does_and_says_when_too_loaded"]),
    ("13", "profile from elsewhere: sh -c 'id > file'", "refused under launch auto; with true the "
     "exact command printed, then run",
     [H + "test_a_profile_from_elsewhere_launches_only_when_told_and_the_command_is_shown"]),
    ("14", "two actors with one --actor.id", "second refused (one line, exit 2); dead one's lock taken",
     [H + "test_a_second_actor_with_the_same_id_is_refused_and_a_dead_ones_lock_taken_over"]),
    ("15", "latest.json claiming version 10^15", "ignored; numbering and pruning from valid files",
     [H + "test_a_lying_latest_json_moves_no_version_and_prunes_nothing"]),
]


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
    with open(os.environ[RESULTS_ENV], "a") as f:
        f.write(json.dumps({"id": report.nodeid, "outcome": report.outcome, "message": message,
                            "seconds": report.duration}) + "\n")


def observed(tests: list[str], results: dict[str, dict]) -> str:
    """One cell: 'as expected' with the time taken, or what went otherwise."""
    mine = [r for nodeid, r in results.items()
            if any(nodeid == t or nodeid.startswith(t + "[") for t in tests)]
    if not mine:
        return "not run"
    bad = [r for r in mine if r["outcome"] == "failed"]
    if bad:
        return f"NOT AS EXPECTED: {bad[0]['message'].removeprefix('E ').strip()}"
    skipped = [r for r in mine if r["outcome"] == "skipped"]
    if len(skipped) == len(mine):
        return f"skipped: {skipped[0]['message']}"
    runs = len(mine) - len(skipped)
    text = f"as expected ({runs} run{'s' * (runs > 1)}, {sum(r['seconds'] for r in mine):.0f} s)"
    return text + (f"; skipped: {skipped[0]['message']}" if skipped else "")

def main() -> int:
    """Run every case's tests, then print the table; exit 1 when any case went otherwise, pytest could
    not run them or none ran."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-k", default="", help="run only the tests pytest's -k selects")
    p.add_argument("--per-case-s", type=float, default=300.0, help="time limit of each test")
    p.add_argument("--total-s", type=float, default=1800.0, help="time limit of the whole probe")
    add_smoke(p)
    args = p.parse_args()
    if args.smoke:  # a hostile chunk in a real actor's replay, and a lying latest.json
        args.k, args.per_case_s, args.total_s = "zip or latest_json", 120.0, 240.0
    tests = [t for _, _, _, group in CASES for t in group]
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        results_path = pathlib.Path(tmp) / "results.jsonl"
        results_path.touch()
        env = dict(os.environ, **{RESULTS_ENV: str(results_path), "JAX_PLATFORMS": "cpu"},
                   PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench"),
                                               os.environ.get("PYTHONPATH", "")]))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "hostile_inputs", "-p", "no:cacheprovider",
                   "--basetemp", str(pathlib.Path(tmp) / "t"), "--timeout", str(args.per_case_s),
                   *(["-k", args.k] if args.k else []), *tests]
        began = time.monotonic()
        with open(pathlib.Path(tmp) / "pytest.txt", "w+") as log:
            proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                proc.wait(args.total_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its children (actors, learners) too
                proc.wait()
                print(f"stopped at the time limit ({args.total_s:.0f} s); cases not reached: 'not run'")
            broken = proc.returncode not in (0, 1, -signal.SIGKILL, 5)  # 5: -k selected nothing
            if broken:
                log.seek(0)
                print("pytest could not run the cases:\n" + "".join(log.readlines()[-15:]))
        results = {r["id"]: r for r in map(json.loads, results_path.read_text().splitlines())}
    rows = [(item, case, expected, observed(group, results)) for item, case, expected, group in CASES]
    print(f"issue 17 hostile probe: {len(results)} tests in {time.monotonic() - began:.0f} s\n")
    print("| # | case | expected | observed |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 1 if broken or not results or any(row[3].startswith("NOT") for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

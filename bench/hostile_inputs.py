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

import pytest_cases  # the runner, its pytest plugin and the table, shared with bench/faults.py

H, E, C = "tests/test_hostile.py::", "tests/test_cli_errors.py::", "tests/learner/test_checkpoint.py::"
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
     [H + "test_a_stopped_actor_cuts_the_episode_at_the_gap_and_a_starved_one_says_too_loaded"]),
    ("13", "profile from elsewhere: sh -c 'id > file'", "refused under launch auto; with true the "
     "exact command printed, then run",
     [H + "test_a_profile_from_elsewhere_launches_only_when_told_and_the_command_is_shown"]),
    ("14", "two actors with one --actor.id", "second refused (one line, exit 2); dead one's lock taken",
     [H + "test_a_second_actor_with_the_same_id_is_refused_and_a_dead_ones_lock_taken_over"]),
    ("15", "latest.json claiming version 10^15", "ignored; numbering and pruning from valid files",
     [H + "test_a_lying_latest_json_moves_no_version_and_prunes_nothing"]),
]


def main() -> int:
    """Run every case's tests, then print the table; exit 1 when any case went otherwise, pytest could
    not run them or none ran."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pytest_cases.add_arguments(p, per_case_s=300.0, total_s=1800.0)
    args = p.parse_args()
    if args.smoke:  # a hostile chunk in a real actor's replay, and a lying latest.json
        args.k, args.per_case_s, args.total_s = "zip or latest_json", 120.0, 240.0
    tests = [t for _, _, _, group in CASES for t in group]
    done = pytest_cases.run(tests, args.k, args.per_case_s, args.total_s, prefix="hostile-")
    rows = [[item, case, expected, pytest_cases.observed(group, done.results)]
            for item, case, expected, group in CASES]
    pytest_cases.print_table(f"issue 17 hostile probe: {len(done.results)} tests in {done.seconds:.0f} s",
                             ["#", "case", "expected", "observed"], rows)
    return 1 if done.failed([row[3] for row in rows]) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Issue 33's faults of a long run in one command: every fault, the steps played and kept, what was said.

Each fault is a test under tests/ that runs the real actor, learner or `run` and does the real thing to
it (deletes a folder, starts a second learner, stops the game's or the learner's process, fills a
disk, gives it a misbehaving gymnasium env or a wrong-shaped config.yaml) and asserts what is kept and
what is printed. This runs them all in a temporary folder, each under a time limit and the whole under
another (bench/pytest_cases.py, shared with bench/hostile_inputs.py), and prints a table: fault, steps
played, steps kept, lines printed (what the test recorded with record_property; paths in the test's
own temporary folder read TMP) and verdict (as expected / NOT AS EXPECTED with the assertion message /
skipped with the reason). A dash: no steps are played in that case. The full-disk cases mount a small
tmpfs and need root; the frozen game needs Xvfb; elsewhere they show as skipped, with the reason.

    .venv/bin/python bench/faults.py [-k EXPR] [--per-case-s 300] [--total-s 1800]
    .venv/bin/python bench/faults.py --smoke      # two quick faults: -k "logdir-list or raise"
"""

from __future__ import annotations

import argparse

import pytest_cases  # the runner, its pytest plugin and the table, shared with bench/hostile_inputs.py

H, AL = "tests/test_hostile.py::", "tests/test_actor_learner.py::"
E, L = "tests/test_cli_errors.py::", "tests/envs/test_live.py::"
CONFIG = E + "test_wrong_shaped_config_file_is_one_line_naming_it"
ENV_FAILS = H + "test_an_env_that_fails_mid_episode_is_one_line_and_its_traceback_a_file"
FULL_DISK = H + "test_actor_holds_what_a_full_disk_refuses_keeps_playing_then_stops_with_one_line"
CASES = [  # (issue item, fault, tests)
    ("1", "replay folder deleted while `run`'s actor and learner play and train (steps kept: written "
     "to the folder before and after)",
     [AL + "test_a_replay_folder_deleted_mid_run_comes_back_and_keeps_every_later_step"]),
    ("2", "a second learner on the logdir; then the first killed (SIGKILL) and a third started",
     [H + "test_a_second_learner_on_a_logdir_is_refused_and_a_dead_ones_lock_taken_over"]),
    ("3", "the live Catcher game's process stopped (SIGSTOP) 4 s, env.live.frozen_s 1.5",
     [L + "test_a_frozen_game_is_cut_like_a_gone_one_and_play_resumes_when_it_moves"]),
    ("4", "gymnasium env: NaN observations from step 50 of each episode",
     [H + "test_non_finite_observations_end_the_episode_at_the_actor_and_are_never_stored"]),
    ("5", "params folder deleted while the learner publishes; then a file where it was, and SIGTERM",
     [H + "test_a_params_folder_deleted_during_a_run_comes_back_and_the_exit_line_claims_no_lost_version"]),
    ("6", "gymnasium env: RuntimeError at step 50", [ENV_FAILS + "[raise]"]),
    ("6", "gymnasium env: observation (4,) becomes (5,) at step 50", [ENV_FAILS + "[reshape]"]),
    ("7", "DIR/config.yaml a YAML list, on restart", [CONFIG + "[logdir-list]"]),
    ("7", "DIR/config.yaml `agent: 5`, on restart", [CONFIG + "[logdir-scalar]"]),
    ("7", "DIR/config.yaml with a list for `agent.enc`; a misspelt key", [CONFIG + "[logdir-nested]",
                                                                            CONFIG + "[logdir-typo]"]),
    ("8", "full disk (16 MiB tmpfs) under the actor, full again for replay.hold_s (6 s)",
     [FULL_DISK + "[hold_s]"]),
    ("8", "full disk under the actor, then SIGINT while chunks are held", [FULL_DISK + "[SIGINT]"]),
    ("9", "learner stopped (SIGSTOP) under `run`; then SIGHUP, and Ctrl-C while both save",
     [AL + "test_run_says_the_learner_is_silent_then_sighup_and_a_second_signal_are_a_line_each"]),
    ("9", "learner resumed with no new data (its status line)",
     [H + "test_a_learner_resumed_with_no_new_data_says_no_update_yet_not_a_nan_loss"]),
    ("11", "the actor stopped (SIGSTOP) 3 s, as a suspended laptop or VM; then starved of CPU",
     [H + "test_a_stopped_actor_cuts_the_episode_at_the_gap_and_a_starved_one_says_too_loaded"]),
    ("12", "the wall clock an hour ahead and back: the actor's chunk names, the learner's heartbeats",
     ["tests/replay/test_replay.py::test_a_wall_clock_that_jumps_reorders_no_chunk",
      "tests/transport/test_sync.py::test_a_learner_whose_wall_clock_jumps_back_is_heard_all_the_same"]),
    ("13", "live memory values gone bad: 1e9 through a stale pointer, outside the profile's range, "
     "an unmapped page, NaN",
     [L + "test_garbage_and_unreadable_memory_values_are_never_stored"]),
    ("14", "the actor's logdir on a file system whose writes block ~15 s (fsfreeze on a loop-mounted "
     "ext4: a stalled share)",
     [H + "test_a_share_whose_writes_block_is_said_and_the_status_line_goes_on"]),
    ("15", "the learner under an address-space cap of 500 MB, then 1.5 GB (prlimit --as)",
     [E + "test_a_learner_under_a_memory_cap_says_so_in_one_line[500]",
      E + "test_a_learner_under_a_memory_cap_says_so_in_one_line[1500]"]),
    ("10", "the live Catcher's window moved wholly off the screen, then partly (xdotool windowmove), "
     "then back after 1.5 s each time",
     [L + "test_a_window_not_wholly_on_the_screen_is_cut_like_a_gone_one_in_one_line"]),
    ("77.2", "every fsync under the learner's logdir takes 1 s (os.fsync slowed in the learner)",
     [H + "test_a_learner_on_a_disk_whose_fsyncs_take_a_second_trains_on_and_says_so"]),
    ("77.3", "the private Ray cluster's head (its GCS process) SIGKILLed under a run with a Ray actor "
     "and one joined by hand", ["tests/transport/test_ray.py::"
                                "test_the_clusters_head_killed_ends_the_run_in_one_line_with_every_step_kept"]),
    ("77.1", "a second player (`check`, as a second actor or `record` would) on the game window an env plays",
     [L + "test_a_second_player_on_a_played_window_is_refused_in_one_line"]),
]
SMOKE_K = "logdir-list or raise"  # a wrong-shaped config.yaml (~3 s), an env that raises (~10 s)


def figures(tests: list[str], results: dict[str, dict], name: str) -> str:
    """A cell of what the case's tests recorded as `name`: a dash when they record none."""
    values = pytest_cases.properties(tests, results, name)
    if name == "lines":
        return "<br>".join(f"`{line}`" for line in values) or "—"
    return ", ".join(map(str, values)) or "—"


def main() -> int:
    """Run every fault's tests, then print the table; exit 1 when any went otherwise, pytest could not
    run them or none ran."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pytest_cases.add_arguments(p, per_case_s=300.0, total_s=1800.0)
    args = p.parse_args()
    if args.smoke:
        args.k, args.per_case_s, args.total_s = SMOKE_K, 120.0, 240.0
    tests = [t for _, _, group in CASES for t in group]
    done = pytest_cases.run(tests, args.k, args.per_case_s, args.total_s, prefix="faults-")
    rows = [[item, fault, *(figures(group, done.results, name)
                            for name in ("steps_played", "steps_kept", "lines")),
             pytest_cases.observed(group, done.results)] for item, fault, group in CASES]
    pytest_cases.print_table(f"issue 33 faults of a long run: {len(done.results)} tests in "
                             f"{done.seconds:.0f} s",
                             ["#", "fault", "steps played", "steps kept", "lines printed", "verdict"], rows)
    return 1 if done.failed([row[-1] for row in rows]) else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How pytest-xdist shares the suite among workers (`make test`: `-n auto --dist loadgroup`).

Each test module runs whole on one worker, and the modules that share a session fixture's run
(SHARED_RUNS) run on one worker together, so every module fixture and shared run is made once.
xdist's own loadgroup reads `xdist_group` marks through a suffix it writes into each test's node
id, a write that pytest 9.2 ignores: every module fixture was then made on every worker (the
actor-learner scenario three times). This scheduler takes the group from the node id's module
instead and needs no mark; the longest groups go first (LONGEST), then the rest by their count of
tests (xdist's loadscope order)."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

from dreamer_live.process import waiting_jobs

# module -> the session fixture whose run it shares with the others of its group
# (test_hostile reads actor_run too, on a worker of its own: its tests are the suite's longest chain,
# and a second actor_run costs a few seconds)
SHARED_RUNS = {"test_viz": "run_dir", "test_eval": "run_dir",
               "test_offline": "actor_run", "test_devices": "actor_run"}

# The groups that take longest (wall seconds on 3 workers, the CPU made 1.8x slower by
# bench/slow_cpu.py --share 0.45, compile cache empty, 2026-11-29: 283 ... 61 s;
# docs/experiments/2026-11-30-test-suite-time-slow-cpu.md),
# handed out first so that none starts last and ends the run alone: by count of tests,
# test_agent_learns (one test, 96 s) went last and its worker ran 50-90 s after the other two were
# done. Longest first, but test_ray after the first three: its cluster start, beside their cold
# compiles, once waited past 100 s for three actors ticking.
LONGEST = ("test_hostile", "test_agent", "test_actor_learner", "test_ray", "actor_run", "run_dir",
           "test_live", "test_agent_learns", "test_cli_errors", "test_agent_reference")


def group(nodeid: str) -> str:
    """A test's xdist group: its module's name, or its shared run's (SHARED_RUNS)."""
    module = nodeid.split("::", 1)[0].rpartition("/")[2].removesuffix(".py")
    return SHARED_RUNS.get(module, module)


class GroupScheduling(LoadScopeScheduling):
    """xdist's loadscope scheduling with `group` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return group(nodeid)

    def _assign_work_unit(self, node) -> None:
        for name in longest_first(self.workqueue):
            self.workqueue.move_to_end(name)
        super()._assign_work_unit(node)


def longest_first(groups) -> list[str]:
    """`groups` with LONGEST's first, in its order, then the rest in the order given."""
    return sorted(groups, key=lambda name: LONGEST.index(name) if name in LONGEST else len(LONGEST))


def pytest_xdist_make_scheduler(config, log):
    """GroupScheduling for `--dist loadgroup`; xdist's own for any other mode."""
    return GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def pytest_xdist_auto_num_workers(config):
    """Workers for -n auto: process.waiting_jobs (1.5 per core), 2 to 8."""
    return min(8, max(2, waiting_jobs()))

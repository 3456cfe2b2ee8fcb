"""process.share_cpu in a real child process: the learner's priority and cores as the actor sees them."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os, sys, threading
from dreamer_live.process import share_cpu
note = share_cpu(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1")
seen = {}
def look():  # a thread started afterwards, as XLA's pool is: it inherits the manners
    seen["policy"] = os.sched_getscheduler(0)
    seen["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    seen["cores"] = sorted(os.sched_getaffinity(0))
t = threading.Thread(target=look); t.start(); t.join()
print(json.dumps({"note": note, **seen}))
"""

linux_only = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux-only")


def probe(threads: int, nice: int, idle: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(threads), str(nice), "1" if idle else "0"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@linux_only
def test_default_manners_keep_every_core_at_idle_priority():
    cores = sorted(os.sched_getaffinity(0))
    got = probe(0, 10, True)
    assert got["policy"] == os.SCHED_IDLE
    assert got["nice"] >= os.getpriority(os.PRIO_PROCESS, 0) + 10 or got["nice"] == 19
    assert got["cores"] == cores
    assert "idle priority" in got["note"] and f"all {len(cores)} cores" in got["note"]


@linux_only
def test_one_core_leaves_core_0_to_the_actor():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores")
    got = probe(-1, 0, False)
    assert got["policy"] == os.SCHED_OTHER
    assert got["cores"] == cores[1:]


def test_auto_threads_leave_core_0_to_a_fast_actor():
    from dreamer_live.process import ALL_CORES_MAX_HZ, learner_threads

    assert learner_threads(0, 15.0) == 0
    assert learner_threads(0, ALL_CORES_MAX_HZ) == 0
    assert learner_threads(0, 60.0) == -1
    assert learner_threads(2, 60.0) == 2 and learner_threads(-1, 15.0) == -1


class WindowsPsutil:
    """Stand-in for psutil on Windows (its priority classes exist only there): records the calls."""

    IDLE_PRIORITY_CLASS, BELOW_NORMAL_PRIORITY_CLASS = 0x40, 0x4000
    Error = OSError

    def __init__(self, cores):
        self.cores, self.calls = cores, []

    def Process(self):  # noqa: N802 (psutil's name)
        return self

    def nice(self, level):
        self.calls.append(("nice", level))

    def cpu_affinity(self, cores=None):
        if cores is None:
            return list(self.cores)
        self.calls.append(("cpu_affinity", cores))


@pytest.mark.parametrize("threads, nice, idle, calls, note", [
    (0, 10, True, [("nice", 0x40)], "idle priority class, all 4 cores"),
    (0, 10, False, [("nice", 0x4000)], "below-normal priority class, all 4 cores"),
    (-1, 0, False, [("cpu_affinity", [1, 2, 3])], "cores 1,2,3 of 4"),
    (2, 5, True, [("nice", 0x40), ("cpu_affinity", [1, 2])], "idle priority class, cores 1,2 of 4"),
])
def test_on_windows_the_learner_takes_a_lower_priority_class_and_fewer_cores_through_psutil(
        threads, nice, idle, calls, note):
    from dreamer_live.process import share_cpu_windows

    psutil = WindowsPsutil([0, 1, 2, 3])
    assert share_cpu_windows(psutil, threads, nice, idle) == note
    assert psutil.calls == calls

"""The suite's xdist scheduling (tests/xdist_groups.py) in a real pytest run on two workers: each
module's fixture is made once, and the modules that share a run share a worker; the longest groups
are handed out first."""

import json
import os
import subprocess
import sys
import textwrap

from xdist_groups import LONGEST, SHARED_RUNS, group, longest_first

TESTS = 4  # per module: xdist's load scheduling would spread them over both workers


def test_each_module_and_each_shared_run_is_set_up_on_one_worker(tmp_path):
    shared = [module for module, run in SHARED_RUNS.items() if run == "run_dir"]
    modules = [*shared, "test_alone"]
    log = tmp_path / "setups.jsonl"
    for module in modules:
        body = textwrap.dedent(f"""
            import json, os, pytest
            @pytest.fixture(scope="module")
            def made():
                with open({str(log)!r}, "a") as f:
                    f.write(json.dumps([{module!r}, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
            """) + "".join(f"def test_{i}(made): pass\n" for i in range(TESTS))
        (tmp_path / f"{module}.py").write_text(body)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist_groups",
         "-n", "2", "--dist", "loadgroup", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(__file__), PYTEST_ADDOPTS=""))
    assert result.returncode == 0, result.stdout + result.stderr
    setups = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(module for module, _ in setups) == sorted(modules)  # each module's fixture once
    workers = dict(setups)
    assert len({workers[module] for module in shared}) == 1  # the run's modules on one worker
    assert group(f"tests/tools/{shared[0]}.py::test_x[a]") == "run_dir"
    assert group("tests/envs/test_live.py::test_x") == "test_live"


def test_the_longest_groups_are_handed_out_first():
    """LONGEST's groups first, in its order (run_dir is one, after the first two); the rest keep the
    order xdist gave them (most tests first)."""
    given = ["test_alone", "run_dir", LONGEST[1], "test_other", LONGEST[0]]
    assert longest_first(given) == [LONGEST[0], LONGEST[1], "run_dir", "test_alone", "test_other"]

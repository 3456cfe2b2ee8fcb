# `make run`, `make test` and `make bench-smoke` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: run test lint bench-smoke clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[live]'
	touch $@

$(STAMP_TEST): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[live,test]'
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(PY) -m dreamer_live.run $(ARGS)

# pytest-xdist workers, 1.5 per core (2 to 8), each module (or modules sharing a run) on one worker
# (tests/xdist_groups.py); ARGS="-n 0" runs one process (docs/testing.md).
test: $(STAMP_TEST)
	$(PY) -m pytest -q -n auto --dist loadgroup $(ARGS)

# ruff (pyproject.toml's [tool.ruff]): unused imports, redefinitions, undefined names, import order.
lint: $(STAMP_TEST)
	$(PY) -m ruff check .

# Every benchmark's --smoke mode, 1.5 per core at once (bench/smoke.py; ARGS: bench names, --jobs, --timeout, --verbose).
bench-smoke: $(STAMP_TEST)
	$(PY) bench/smoke.py $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info

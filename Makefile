# Two commands for a fresh machine: `make demo` and `make test`.
# Both set up .venv in the repo root (once) from constraints.txt.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tf_preempt-installed
PYTEST_ARGS ?=

.PHONY: demo test test-fast venv clean

venv: $(STAMP)

$(STAMP): setup.py constraints.txt $(wildcard tf_preempt/ops/*.cc tf_preempt/ops/*.h)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt --upgrade pip setuptools wheel
	$(PY) -m pip install -q -c constraints.txt tensorflow-cpu keras numpy \
	    absl-py tensorflow-datasets pytest hypothesis matplotlib
	$(PY) -m pip install -q -c constraints.txt --no-build-isolation \
	    -e ".[cpu,test]"
	touch $(STAMP)

# The main job: see README.md.
demo: $(STAMP)
	$(PY) scripts/demo.py

# The whole suite, slow multi-process tests included (CI runs this).
test: $(STAMP)
	$(PY) -m pytest tests $(PYTEST_ARGS)

# Local shortcut: skips the tests marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest tests -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info tf_preempt/ops/*.so

# Two commands on a fresh machine with Python 3.11 and make:
#   make demo   set up .venv and run the main job (two training ranks, one profiled window)
#   make test   set up .venv with the test tools and frameworks, then lint and run every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint bench bench-cluster clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Runtime install: only the package and its light dependencies (no framework).
$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# Test install: test tools plus the real frameworks the tests profile.
$(VENV)/.test: pyproject.toml $(VENV)/.base
	$(BIN)/python -m pip install -q -e '.[test]' torch==2.13.0
	touch $@

# MindSpore 2.7.0 pins numpy<2 and this venv's pandas 3.1 needs numpy>=2, so MindSpore gets
# its own venv: the tests run MindSpore training processes with it (about 1 min, 2.8 GB).
$(VENV)/ms/.stamp: pyproject.toml | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/ms
	$(VENV)/ms/bin/python -m pip install -q -e . mindspore==2.7.0
	touch $@

# msprof-analyze 26.2.0, Ascend's cluster analysis tool, is the oracle the NPU tests compare
# dynprof_nb's numbers with (tests/analysis/test_cluster_msprof.py). Its own venv keeps its
# unpinned dependencies (sqlalchemy, plotly, xlsxwriter...) out of the test venv.
$(VENV)/msprof/.stamp: | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/msprof
	$(VENV)/msprof/bin/python -m pip install -q msprof-analyze==26.2.0
	touch $@

# HTA 0.5.0 (HolisticTraceAnalysis), the oracle of the Kineto/GPU numbers
# (tests/analysis/test_hta_oracle.py runs it through tests/hta_oracle.py). Its own venv: it pins
# pandas/numpy/plotly versions of its own.
$(VENV)/hta/.stamp: | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/hta
	$(VENV)/hta/bin/python -m pip install -q holistictraceanalysis==0.5.0
	touch $@

# The real-browser test drives Debian's chromium; Playwright never downloads a browser.
/usr/bin/chromium:
	apt-get update && apt-get install -y chromium

# A rank whose wall clock is stepped mid-run (tests/test_reliability_clock.py) runs under
# Debian's libfaketime.
/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1:
	apt-get update && apt-get install -y faketime libfaketime

demo: $(VENV)/.base
	$(BIN)/dynprof demo

lint: $(VENV)/.test
	$(BIN)/ruff check dynprof_nb tests benchmarks
	$(BIN)/ruff format --check dynprof_nb

# tests/ plus the notebooks, executed by nbval in this venv's Python
test: $(VENV)/.test $(VENV)/ms/.stamp $(VENV)/msprof/.stamp $(VENV)/hta/.stamp /usr/bin/chromium \
		/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 lint
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env \
		--nbval-sanitize-with notebooks/sanitize.cfg tests notebooks

bench: $(VENV)/.test $(VENV)/msprof/.stamp $(VENV)/hta/.stamp
	$(BIN)/python benchmarks/idle_step.py
	$(BIN)/python benchmarks/propagation.py
	$(BIN)/python benchmarks/load_trace.py
	$(BIN)/python benchmarks/load_ascend.py
	$(BIN)/python benchmarks/load_db.py
	$(BIN)/python benchmarks/multirank_load.py --ranks 8 --mb 100

# N simulated nodes (Linux namespaces: needs root) x R ranks driven through Dask; see docs/cluster.md
bench-cluster: $(VENV)/.test
	$(BIN)/python benchmarks/cluster.py

clean:
	rm -rf $(VENV) build *.egg-info

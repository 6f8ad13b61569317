# Two commands on a fresh machine with Python 3.11 and make:
#   make demo   set up .venv and run the main job (two training ranks, one profiled window)
#   make test   set up .venv with the test tools and frameworks, then lint, build the docs (make
#               docs: mkdocs --strict into site/) and run every test,
#               then the environment matrix (make matrix: tests/smoke in .venv/matrix/*)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint docs matrix bench bench-cluster bench-cluster-scale clean

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

# MindSpore 2.7.0 pins numpy<2, so MindSpore gets its own venv, built as a MindSpore user
# builds theirs (pip picks numpy 1.26, pandas 3.0, a pyarrow that cannot import with it): the
# tests run MindSpore training processes with it (about 1 min, 2.8 GB), and it is the matrix's
# MindSpore environment, where tests/smoke profiles and loads in this one venv.
$(VENV)/ms/.stamp: pyproject.toml | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/ms
	$(VENV)/ms/bin/python -m pip install -q -e . mindspore==2.7.0 $(SMOKE_TOOLS)
	touch $@

# ---- the environment matrix: tests/smoke in the environments users have ---------------------
# Each venv is built once (its stamp; rebuilt from scratch when pyproject.toml changes) with uv
# (wheels only, seconds); .venv/ms with pip, as a MindSpore user builds it.
# The interpreters: PY310/PY313 (any CPython 3.10/3.13; uv never downloads one here).
PY310 ?= $(firstword $(wildcard /root/.pyenv/versions/3.10.*/bin/python) python3.10)
PY313 ?= $(firstword $(wildcard /root/.pyenv/versions/3.13.*/bin/python) python3.13)
MATRIX := $(VENV)/matrix
UV := $(VENV)/uv/bin/uv
SMOKE_TOOLS := 'pytest>=8' 'pytest-timeout>=2'
MATRIX_ENVS := py310-lowest np126-torch py313-newest no-pyarrow

$(UV): | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/uv
	$(VENV)/uv/bin/python -m pip install -q 'uv>=0.5'

# Python 3.10 at the lowest version of every dependency pyproject.toml declares
$(MATRIX)/py310-lowest/.stamp: pyproject.toml | $(UV)
	rm -rf $(@D) && $(UV) venv -q -p $(PY310) $(@D)
	$(UV) pip install -q -p $(@D)/bin/python --resolution lowest-direct -e . $(SMOKE_TOOLS)
	touch $@

# what torch_npu/CANN images have: numpy 1.26 beside torch (CPU here). uv reads no pip config:
# a local wheel folder pip is pointed at (PIP_FIND_LINKS: torch's CPU wheel) is passed on
# (pip took 10 min for this venv on a busy machine, uv 20 s)
$(MATRIX)/np126-torch/.stamp: pyproject.toml | $(UV)
	rm -rf $(@D) && $(UV) venv -q -p $(PYTHON) $(@D)
	$(UV) pip install -q -p $(@D)/bin/python $(PIP_FIND_LINKS:%=--find-links %) -e . \
		'numpy==1.26.*' torch==2.13.0 $(SMOKE_TOOLS)
	touch $@

# Python 3.13 at the newest versions
$(MATRIX)/py313-newest/.stamp: pyproject.toml | $(UV)
	rm -rf $(@D) && $(UV) venv -q -p $(PY313) $(@D)
	$(UV) pip install -q -p $(@D)/bin/python -e . $(SMOKE_TOOLS)
	touch $@

# no pyarrow at all: loads work, the frame cache and out-of-core frames are off, said once
$(MATRIX)/no-pyarrow/.stamp: pyproject.toml | $(UV)
	rm -rf $(@D) && $(UV) venv -q -p $(PYTHON) $(@D)
	$(UV) pip install -q -p $(@D)/bin/python -e . $(SMOKE_TOOLS)
	$(UV) pip uninstall -q -p $(@D)/bin/python pyarrow
	touch $@

# tests/smoke in each environment of the matrix (test_smoke_env.py: the samples, a job's
# window, the magics and the quickstart notebook, doctor), with the framework's own window where
# the environment has one; each run's wall time is printed
SMOKE := -m pytest -q -p no:cacheprovider tests/smoke/test_smoke_env.py
define smoke
	@start=$$(date +%s); echo "matrix: $(1): tests/smoke"; \
	DYNPROF_MINDSPORE_PYTHON=$(VENV)/ms/bin/python $(1)/bin/python $(SMOKE) $(2) && \
	echo "matrix: $(1): $$(( $$(date +%s) - start )) s"
endef

matrix: $(MATRIX_ENVS:%=$(MATRIX)/%/.stamp) $(VENV)/ms/.stamp
	$(call smoke,$(MATRIX)/py310-lowest)
	$(call smoke,$(MATRIX)/np126-torch,tests/smoke/test_smoke_torch.py)
	$(call smoke,$(MATRIX)/py313-newest)
	$(call smoke,$(MATRIX)/no-pyarrow)
	$(call smoke,$(VENV)/ms,tests/smoke/test_smoke_mindspore.py)

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

# HTA 0.5.0 was written for pandas 2: under pandas 3 (copy-on-write) its chained
# `df.col.fillna(..., inplace=True)` do nothing and its critical path loses the CUDA event-sync
# edges (tests/hta_critical_path_oracle.py refuses pandas 3). A stamp of its own, so that a
# .venv/hta built before is fixed too.
$(VENV)/hta/.pandas2: $(VENV)/hta/.stamp
	$(VENV)/hta/bin/python -m pip install -q "pandas<3"
	touch $@

# The real-browser test drives Debian's chromium; Playwright never downloads a browser.
/usr/bin/chromium:
	apt-get update && apt-get install -y chromium

# The timeline front-end's unit tests (tests/ui/timeline_js, run by tests/ui/test_timeline_js.py)
# use Node's built-in test runner: Debian's nodejs (18 on bookworm), no npm package.
/usr/bin/node:
	command -v node >/dev/null || (apt-get update && apt-get install -y nodejs)

# A rank whose wall clock is stepped mid-run (tests/test_reliability_clock.py) runs under
# Debian's libfaketime.
/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1:
	apt-get update && apt-get install -y faketime libfaketime

# ---- the documentation site ------------------------------------------------------------------
# MkDocs Material, the API reference from the docstrings (mkdocstrings), the notebooks with their
# outputs (mkdocs-jupyter), built with --strict (a broken link, a missing page or an unresolved
# reference fails) into site/ (gitignored; open site/index.html). The doc tools live in a venv of
# their own, so they never change what the tests run with; mkdocstrings reads the source, so the
# package is not installed there.
DOCS_VENV := $(VENV)/docs
DOCS_TOOLS := 'mkdocs>=1.6,<2' 'mkdocs-material>=9.5' 'mkdocstrings[python]>=0.26' \
	'mkdocs-jupyter>=0.25'
$(DOCS_VENV)/.stamp: pyproject.toml | $(BIN)/python
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q $(DOCS_TOOLS)
	touch $@

docs: $(DOCS_VENV)/.stamp
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet --site-dir site

demo: $(VENV)/.base
	$(BIN)/dynprof demo

lint: $(VENV)/.test
	$(BIN)/ruff check dynprof_nb tests benchmarks
	$(BIN)/ruff format --check dynprof_nb

# tests/ plus the notebooks, executed by nbval in this venv's Python; then the environment
# matrix (tests/smoke runs there, not here). The run takes about 25 min on 2 cores; one still
# going after TEST_LIMIT_S is interrupted (SIGINT), so that pytest itself reports the test it
# was in and its stack, well inside CI's 90 min, instead of being cut off without a word.
TEST_LIMIT_S ?= 3600
test: $(VENV)/.test $(VENV)/ms/.stamp $(VENV)/msprof/.stamp $(VENV)/hta/.pandas2 /usr/bin/chromium \
		/usr/bin/node /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 lint docs
	timeout -s INT -k 120 $(TEST_LIMIT_S) $(BIN)/python -m pytest -q -p no:cacheprovider \
		--nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg \
		--durations=25 --ignore=tests/smoke tests notebooks
	$(MAKE) --no-print-directory matrix

bench: $(VENV)/.test $(VENV)/msprof/.stamp $(VENV)/hta/.pandas2
	$(BIN)/python benchmarks/idle_step.py
	$(BIN)/python benchmarks/propagation.py
	$(BIN)/python benchmarks/load_trace.py
	$(BIN)/python benchmarks/load_ascend.py
	$(BIN)/python benchmarks/load_db.py
	$(BIN)/python benchmarks/multirank_load.py --ranks 8 --mb 100

# N simulated nodes (Linux namespaces: needs root) x R ranks driven through Dask; see docs/cluster.md
bench-cluster: $(VENV)/.test
	$(BIN)/python benchmarks/cluster.py

# How each cluster operation's cost grows with ranks (8, 64, 256; RANKS=1024 adds 32 x 32).
bench-cluster-scale: $(VENV)/.test
	$(BIN)/python benchmarks/cluster_scale.py $(if $(RANKS),--ranks $(RANKS))

clean:
	rm -rf $(VENV) build *.egg-info

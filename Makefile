# Two commands on a fresh machine:  make demo  (the main job)  and  make test  (the tests).
# Both create .venv and install everything they need on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PLUGIN_PYPROJECTS := $(wildcard plugins/*/pyproject.toml) devtools/pyproject.toml

.PHONY: setup demo test generative lint type bench wheels clean

setup: $(STAMP)

$(STAMP): requirements-dev.txt core/pyproject.toml $(PLUGIN_PYPROJECTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

demo: setup
	$(BIN)/outcommit demo $(DEMO_ARGS)

test: setup
	$(BIN)/pytest $(PYTEST_ARGS)

# The generative tests with LONG_FACTOR times their CI budget, a new seed, the emulators' stores
# too; failures are saved to tests/hypothesis-examples/ (tests/generative.py).
generative: setup
	seed=$$(date +%s); echo "hypothesis seed $$seed"; \
	OUTCOMMIT_HYPOTHESIS=long $(BIN)/pytest -m generative -p no:cacheprovider --hypothesis-seed=$$seed $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check core plugins devtools tests benchmarks

type: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/run_all.py

# Every distribution's wheel in dist/ (docs/install.md: install them with --find-links dist/).
# Built in isolation by the pip of $(PYTHON) (pip fetches setuptools into a throwaway build
# environment): no .venv, so no Ray, Spark or Dask to install for six pure-Python wheels.
DISTRIBUTIONS := core plugins/s3 plugins/azure plugins/gcs plugins/hdfs devtools
wheels:
	$(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir dist $(addprefix ./,$(DISTRIBUTIONS))
	rm -rf $(addsuffix /build,$(DISTRIBUTIONS))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

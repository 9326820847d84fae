# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What each target installs: the demo only the library and its figures (matplotlib); the
# tests, the web app and the benchmarks everything ([dev]). A stamp per set, so `make demo`
# after `make test` installs nothing more. --no-compile: Python byte-compiles what is
# imported when it is first imported, instead of pip compiling every installed file
# (74 s -> 29 s for [dev]).
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo test fuzz lint bench clean browser serve

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml constraints/ci.txt | $(VENV)/bin/python
	@echo "installing fabricsim with the test tools ([dev]) into $(VENV)"
	$(BIN)/python -m pip install --quiet --no-compile -c constraints/ci.txt -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml constraints/ci.txt | $(VENV)/bin/python
	@echo "installing fabricsim with its figures ([plot]) into $(VENV)"
	$(BIN)/python -m pip install --quiet --no-compile -c constraints/ci.txt -e '.[plot]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/fabricsim demo --out out
	@echo "The same designs in the browser: make serve, then open http://127.0.0.1:8000/"

# The web app on this machine only (jobs kept in fabricsim-web.duckdb).
serve: $(STAMP)
	$(BIN)/fabricsim serve --port 8000

# Debian's Chromium for the browser tests (tests/web/test_browser.py), when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium >/dev/null || \
	  { $$SUDO apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium >/dev/null; }; }

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# Tests run on every core (pytest-xdist), a file per worker so a file's shared fixtures
# are built once, after the numba kernels are compiled once (not once per worker); the
# kernels compile while ruff and mypy run.
test: $(STAMP)
	@$(BIN)/python -m fabricsim.backends.precompile & warm=$$!; \
	$(MAKE) --no-print-directory lint; lint=$$?; wait $$warm; warm=$$?; \
	[ $$lint -eq 0 ] && [ $$warm -eq 0 ]
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# The same Hypothesis properties with fresh random examples, 20x the CI budget, and an
# example database in .hypothesis/ that replays any failure found until it is fixed.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz FABRICSIM_FUZZ_SCALE=$${FABRICSIM_FUZZ_SCALE:-20} \
		$(BIN)/python -m pytest -q -o addopts="-ra --strict-markers" $$(grep -rl '@given' tests)

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out .mypy_cache .pytest_cache .ruff_cache

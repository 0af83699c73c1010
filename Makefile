# Two commands do all set-up on a fresh machine:
#   make book   installs what it needs, executes every chapter, builds the HTML book (_build/html)
#   make test   installs what it needs, runs the whole test suite (unit, integration, book; what CI runs)
# For development: make test-fast (unit tier only, no apt or npm), make lint (ruff), make bench.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
MODEL ?= all-MiniLM-L6-v2
CORPUS ?= lee
PARAMS ?=
ONLY ?=
REPO_URL ?=
BRANCH ?= main
PYTEST_ARGS ?=
NPM_PACKAGES := mathjax@3.2.2 @jupyter-widgets/html-manager@1.0.15 requirejs@2.3.8 playwright-core@1.65.1

.PHONY: book test test-fast lint venv vendor browser bench clean

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# --no-deps: requirements.txt is a complete lock (see its header)
	$(PY) -m pip install -q --no-deps -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

venv: $(VENV)/.installed

# Scripts the pages load (MathJax, the widget manager, require.js) come from npm, once; vega is written
# from the vl-convert wheel at build time. Nothing is fetched from a CDN when a page is read.
.cache/npm/.installed: Makefile
	mkdir -p .cache/npm
	cd .cache/npm && npm install --no-save --no-audit --no-fund --loglevel=error $(NPM_PACKAGES)
	touch $@

vendor: .cache/npm/.installed

book: venv vendor
	$(PY) -m identifiability.cli book --model "$(MODEL)" --corpus "$(CORPUS)" \
		$(foreach p,$(PARAMS),-p $(p)) $(if $(ONLY),--only $(ONLY)) \
		$(if $(REPO_URL),--repository "$(REPO_URL)") --branch "$(BRANCH)"

# The browser check needs Debian's chromium; as root it is installed here, elsewhere install it yourself.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "warning: chromium missing (apt-get install chromium); the browser test will fail"

test: venv vendor browser
	$(PY) -m pytest -ra $(PYTEST_ARGS)

# The unit tier: tiny random models, no real-model run, no notebook, no browser; under two minutes.
test-fast: venv
	$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

bench: venv
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf _build .cache data/results data/cache

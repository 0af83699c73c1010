# Two commands do all set-up on a fresh machine:
#   make book   installs what it needs, executes every chapter, builds the HTML book (_build/html)
#   make test   installs what it needs, runs the whole test suite (unit, integration, book; what CI runs)
# For development: make test-fast (unit tier only, no apt or npm), make lint (ruff), make bench.
# For teaching: make lab (the chapters in JupyterLab), make handout (student versions of the chapters).
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
# make sweep: comma-separated lists; SCHEDULER=tcp://host:8786 uses a running Dask cluster, else a local one
MODELS ?= $(MODEL)
CORPORA ?= $(CORPUS)
SEEDS ?= 0
CHAPTERS ?=
SCHEDULER ?=
WORKERS ?=
NPM_PACKAGES := mathjax@3.2.2 @jupyter-widgets/html-manager@1.0.15 requirejs@2.3.8 playwright-core@1.65.1

.PHONY: book test test-fast lint venv vendor browser bench clean models sweep compare

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

.PHONY: lab handout

# The chapters in JupyterLab, with the project's Python as the kernel ("python3" of the venv): jupytext opens
# the MyST sources (notebooks/*.md) as notebooks (.jupyter/lab/settings/overrides.json); a downloaded chapter
# (.ipynb) opens as well. Offline; Ctrl-C stops it. Saving a source keeps it MyST text, without outputs.
lab: venv
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks \
		--LabApp.app_settings_dir="$(CURDIR)/.jupyter/lab/settings" $(if $(filter 0,$(shell id -u)),--allow-root)

# Student versions of the chapters (solutions removed, a check cell after each exercise), into _build/handout
handout: venv
	$(PY) -m identifiability.handout --out _build/handout

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

# The chapters' code cells are linted too, at the 80 characters the book's code box holds (.ci/notebook_code.py
# writes them as Python; E402: imports follow the parameters cell; B018: a cell's last expression is its output).
lint: venv
	$(VENV)/bin/ruff check src tests benchmarks .ci
	$(VENV)/bin/ruff format --check src tests benchmarks .ci
	rm -rf .cache/lint && $(PY) .ci/notebook_code.py .cache/lint
	$(VENV)/bin/ruff check --line-length 80 --extend-ignore E402,B018 .cache/lint/*.py

# The models of the comparison across models, into data/models/: the embedded model fine-tuned on each task
# (under 10 minutes each on 2 cores; an interrupted run resumes, a finished one is skipped) and the
# random-initialisation control. See "Fine-tuned models" in README.md.
models: venv
	$(PY) -m identifiability.cli finetune --task sentiment
	$(PY) -m identifiability.cli finetune --task lee-pairs
	$(PY) -m identifiability.cli init-random --seed 0

# The comparison across models: fine-tune (skipped when done), run chapters 3, 4 and 6 on every model on the
# held-out Lee sentences and pairs through the sweep runner (finished runs are reused), then build the book,
# whose page "Across models" shows them side by side. COMPARE_PARAMS keep it within 45 minutes on 2 cores.
COMPARE_MODELS ?= default,data/models/all-MiniLM-L6-v2-sentiment-seed0,data/models/all-MiniLM-L6-v2-lee-pairs-seed0,data/models/all-MiniLM-L6-v2-random-seed0
# Chapter 6 (HTA, the costliest per sentence) gets fewer sentences of its own (06:name=value applies to it only).
COMPARE_PARAMS ?= n_sentences=150 second_corpus= epochs=10 n_exact=8 n_exact_long=1 fig1_repeats=1 fig1_long_repeats=8 \
	viewer_sentences=1 06:n_sentences=40 06:n_exact=4 06:n_explorer=2
compare: models vendor
	$(PY) -m identifiability.cli sweep --models "$(COMPARE_MODELS)" --corpora lee_heldout,lee_pairs --seeds 0 \
		--chapters 03,04,06 $(foreach p,$(COMPARE_PARAMS),-p $(p)) $(if $(WORKERS),--workers $(WORKERS))
	$(MAKE) book

# Chapters over models x corpora x seeds on Dask (resumable: finished runs are skipped), then the
# results table data/results.parquet. See "Sweeps" in README.md.
sweep: venv
	$(PY) -m identifiability.cli sweep --models "$(MODELS)" --corpora "$(CORPORA)" --seeds "$(SEEDS)" \
		$(if $(CHAPTERS),--chapters "$(CHAPTERS)") $(foreach p,$(PARAMS),-p $(p)) \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(WORKERS),--workers $(WORKERS))

bench: venv
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf _build .cache data/results data/cache

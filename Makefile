# The commands of the README. Each sets up .venv on first use (Python 3.11+ as python3) and
# reinstalls only when pyproject.toml changes.
#
#   make run    the whole service on this machine (migrate, seed the simulator, web on
#               http://$(HOST):$(PORT), a Celery worker and beat); Ctrl-C stops all of it
#   make test   ruff and the tests, against PostgreSQL and Redis (started if needed)
#   make demo   the engine alone on the example cluster (no database, nothing kept)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Holds the hash of the pyproject.toml the venv was installed from.
STAMP := $(VENV)/.installed-pyproject

# Where `make run` serves the web pages and the API.
HOST ?= 127.0.0.1
PORT ?= 8000

# The example cluster's timestamps are relative to this instant (examples/generate_cluster.py):
# fixing the clock makes the demo's wait times and decisions the same on every run.
DEMO_NOW ?= 2025-06-01T12:00:00Z

.PHONY: run demo test venv services lint

run: venv
	$(BIN)/python manage.py tas_run --host $(HOST) --port $(PORT)

demo: venv
	$(BIN)/tas simulate examples/cluster.yaml -o table --cycles all --now $(DEMO_NOW)

test: venv services lint
	$(BIN)/pytest

venv:
	@if [ ! -x $(BIN)/python ]; then \
		$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
			|| { echo "error: $(PYTHON) is older than Python 3.11; run: make PYTHON=python3.11 ..." >&2; exit 1; }; \
		echo "Creating $(VENV) ..."; \
		$(PYTHON) -m venv $(VENV); \
	fi
	@want="$$($(BIN)/python -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"; \
	if [ "$$(cat $(STAMP) 2>/dev/null)" != "$$want" ]; then \
		echo "Installing the project and its dependencies into $(VENV) ..."; \
		$(BIN)/python -m pip install -qq --disable-pip-version-check -e '.[dev]' && echo "$$want" > $(STAMP); \
	fi
	@# An editable install leaves the project's own modules uncompiled, and where
	@# PYTHONDONTWRITEBYTECODE is set every command would compile them again (about a fifth
	@# of a second of each `tas` run); compileall writes the bytecode anyway and redoes only
	@# what changed since.
	@$(BIN)/python -m compileall -q -j 0 scheduler tasweb manage.py > /dev/null

services:
	@scripts/ensure-services.sh

lint: venv
	$(BIN)/ruff check .

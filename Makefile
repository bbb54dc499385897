# agentsite: the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint install system-deps migrate clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

## Debian packages the test suite drives for real (Redis for team-mode tests).
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

migrate: install
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput

run: migrate
	@DEBUG=$${DEBUG:-true} $(PY) manage.py ensure_admin
	@echo "Serving agentsite on http://$(HOST):$(PORT)/"
	DEBUG=$${DEBUG:-true} $(VENV)/bin/daphne -b $(HOST) -p $(PORT) agentsite.asgi:application

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: install system-deps lint
	$(VENV)/bin/pytest

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache

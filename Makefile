# Two commands on a fresh machine: `make run` and `make test`. Each builds its own virtualenv in .venv
# from pyproject.toml and needs nothing installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Re-install whenever pyproject.toml changes; the stamp names what was installed.
RUNTIME_STAMP := $(VENV)/.installed-runtime
TEST_STAMP := $(VENV)/.installed-test
HOST ?= 127.0.0.1
PORT ?= 8000
WORKERS ?= 1
PYTEST_ARGS ?=
# The page tests drive the system Chromium through Playwright (no browser download); the reverse-proxy test
# runs Debian's nginx with the block of docs/operations.md.
CHROMIUM := /usr/bin/chromium
NGINX := /usr/sbin/nginx
# The scale-out tests run Debian's PgBouncer (transaction pooling) in front of the test database.
PGBOUNCER := /usr/sbin/pgbouncer
# The monitoring tests check deploy/prometheus (alert rules, their unit tests, the scrape config) with promtool,
# which Debian's prometheus package ships.
PROMTOOL := /usr/bin/promtool
# The zh-CN screenshots need a font with Chinese glyphs (Chromium draws boxes without one): Debian's WenQuanYi Zen Hei.
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc
# Every page test that takes a screenshot under TENET_SCREENSHOTS (it awaits `_shoot`), so none is left out.
SCREENSHOT_TESTS = $(shell grep -l 'await _shoot' tests/e2e/test_*.py)

.PHONY: run test install install-test worker lint bench clean-data fuzz-wide screenshots pgbouncer promtool property-explore soak soak-short

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(RUNTIME_STAMP)

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Chromium for the page tests (apt-get install chromium)"; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	else \
	  echo "The page tests need Chromium at $(CHROMIUM): install it (Debian: sudo apt-get install chromium)"; exit 1; \
	fi

$(NGINX):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing nginx for the reverse-proxy test (apt-get install nginx-light)"; \
	  apt-get install -y -q nginx-light >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q nginx-light >/dev/null; }; \
	else \
	  echo "The reverse-proxy test needs nginx at $(NGINX): install it (Debian: sudo apt-get install nginx-light)"; exit 1; \
	fi

$(PGBOUNCER):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing PgBouncer for the connection-pooling test (apt-get install pgbouncer)"; \
	  apt-get install -y -q --no-install-recommends pgbouncer >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends pgbouncer >/dev/null; }; \
	  systemctl disable --now pgbouncer >/dev/null 2>&1 || service pgbouncer stop >/dev/null 2>&1 || true; \
	else \
	  echo "The connection-pooling test needs PgBouncer at $(PGBOUNCER): install it (Debian: sudo apt-get install pgbouncer)"; exit 1; \
	fi

$(CJK_FONT):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing a CJK font for the zh-CN screenshots (apt-get install fonts-wqy-zenhei)"; \
	  apt-get install -y -q --no-install-recommends fonts-wqy-zenhei >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends fonts-wqy-zenhei >/dev/null; }; \
	else \
	  echo "The zh-CN screenshots need a CJK font at $(CJK_FONT): install it (Debian: sudo apt-get install fonts-wqy-zenhei)"; exit 1; \
	fi

## PgBouncer for tests/ops/test_pgbouncer.py (make test installs it too)
pgbouncer: $(PGBOUNCER)

# Only its promtool is used: the server the package would start is stopped and disabled at once.
$(PROMTOOL):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing promtool for the monitoring tests (apt-get install prometheus)"; \
	  apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus >/dev/null; }; \
	  systemctl disable --now prometheus >/dev/null 2>&1 || service prometheus stop >/dev/null 2>&1 || true; \
	else \
	  echo "The monitoring tests need promtool at $(PROMTOOL): install it (Debian: sudo apt-get install prometheus)"; exit 1; \
	fi

## promtool for tests/ops/test_monitoring.py (make test installs it too)
promtool: $(PROMTOOL)

## The soak (ops/soak, issue 21; root: it makes network namespaces): 2 API hosts, 2 workers, nginx, PgBouncer, a
## primary and a streaming replica, mixed load with faults on a schedule; report in var/soak/. Not part of `make test`.
SOAK_ARGS ?=
soak: $(TEST_STAMP) $(NGINX) $(PGBOUNCER)
	$(BIN)/python -m ops.soak --duration 600 $(SOAK_ARGS)

## The short soak: 2 minutes, one fault of each kind
soak-short: $(TEST_STAMP) $(NGINX) $(PGBOUNCER)
	$(BIN)/python -m ops.soak --duration 120 $(SOAK_ARGS)

install: $(RUNTIME_STAMP)

install-test: $(TEST_STAMP)

## Install, migrate the (embedded) database and serve the API on http://$(HOST):$(PORT)
run: $(RUNTIME_STAMP)
	$(BIN)/tenet serve --host $(HOST) --port $(PORT) --workers $(WORKERS)

## Background jobs (invitation expiry, mail delivery, clean-up)
worker: $(RUNTIME_STAMP)
	$(BIN)/tenet worker

## Install and run the whole test suite (embedded PostgreSQL unless DATABASE_URL is set)
test: $(TEST_STAMP) $(CHROMIUM) $(NGINX) $(PGBOUNCER) $(PROMTOOL)
	$(BIN)/python -m pytest -n auto $(PYTEST_ARGS)

## The widened fuzz pass (huge exponents, long digit strings, lone surrogates) over every route, longer than the
## one `make test` runs: make fuzz-wide WIDE_EXAMPLES=50 (examples per place a route takes a value)
WIDE_EXAMPLES ?= 25
WIDE_FUZZ_FILES := tests/iam/test_api_fuzz.py tests/workspaces/test_api_fuzz.py tests/social/test_api_fuzz.py \
	tests/meetings/test_api_fuzz.py tests/meetings/agenda/test_api_fuzz.py tests/reservations/test_api_fuzz.py \
	tests/ops/test_api_fuzz_wide.py
fuzz-wide: $(TEST_STAMP)
	FUZZ_WIDE_EXAMPLES=$(WIDE_EXAMPLES) $(BIN)/python -m pytest -n auto -k "widened or every_operation" \
	  $(PYTEST_ARGS) $(WIDE_FUZZ_FILES)

## The stateful property tests on fresh random command sequences (make test replays fixed ones): hunts new
## failures; a coverage assertion failing here only means the run should explore longer
property-explore: $(TEST_STAMP)
	TENET_PROPERTY_EXPLORE=1 $(BIN)/python -m pytest -n auto $(PYTEST_ARGS) tests/property

## The consoles' screenshots in docs/console/, taken by every page test that takes one, in real Chromium (issue 18)
screenshots: $(TEST_STAMP) $(CHROMIUM) $(CJK_FONT)
	TENET_SCREENSHOTS=1 $(BIN)/python -m pytest -q -n auto $(PYTEST_ARGS) $(SCREENSHOT_TESTS)

## Ruff on everything, mypy on src and bench (strict on the kernel)
lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

## Load benchmarks (not part of the test run): make bench SCENARIO=auth_me
SCENARIO ?= auth_me
bench: $(TEST_STAMP)
	$(BIN)/python -m bench $(SCENARIO)

clean-data:
	rm -rf var/

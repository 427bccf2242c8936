# refka: `make run` installs and starts one broker; `make test` installs
# everything the tests need (Debian packages when root, the venv, KafkaJS) and
# runs them. Both work on a fresh Debian machine with Python 3.11.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.refka-installed
TSTAMP := $(VENV)/.refka-test-installed
JSDIR  := tests/js

.PHONY: run test bench fuzz lint system-deps system-deps-test venv install install-test js clean zookeeper api-table

run: install
	$(VENV)/bin/refka serve $(ARGS)

test: install-test js
	$(PY) -m pytest -q $(PYTEST_ARGS)
	$(PY) -m lab.fuzz --frames 3000 --seed 1
	$(PY) -m lab.fuzz.decoders --runs 20000 --seed 1

bench: install-test
	$(PIP) install -q -e '.[test,bench]'
	$(PY) -m lab.bench $(ARGS)

# ruff over everything, mypy over refka (config in pyproject.toml); either failing fails lint.
# make fuzz FUZZ_SECONDS=1800 BROKERS=3: the hostile-client fuzzer against a real broker, then
# the coverage-guided decoder fuzzer for a tenth of that time (lab/fuzz).
FUZZ_SECONDS ?= 60
BROKERS ?= 1
fuzz: install-test
	$(PY) -m lab.fuzz --seconds $(FUZZ_SECONDS) --brokers $(BROKERS)
	$(PY) -m lab.fuzz.decoders --seconds $$(( $(FUZZ_SECONDS) / 10 + 1 ))

lint: install-test
	$(VENV)/bin/ruff check refka tests lab
	$(VENV)/bin/mypy refka

api-table: install
	$(VENV)/bin/refka api-versions --readme README.md

zookeeper: install system-deps-test
	$(VENV)/bin/refka zookeeper

# Debian packages: the venv module for `make run`, a C compiler and Python's headers
# for the compiled record walk (setup.py; without them refka walks records in
# Python, slower); kcat, ZooKeeper (with its JRE), Node.js/npm and Chromium (the
# dashboard's browser test, driven by Playwright) for the tests.
# Installed only when missing, only as root.
system-deps:
	@missing=""; \
	{ $(PYTHON) -m venv --help >/dev/null 2>&1 && $(PYTHON) -c 'import ensurepip' >/dev/null 2>&1; } || missing="$$missing python3-venv"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc"; \
	$(PYTHON) -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
	  || missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	  else echo "missing Debian packages:$$missing (run 'sudo apt-get install$$missing')"; \
	    case "$$missing" in *python3-venv*) exit 1;; esac; fi; fi

system-deps-test: system-deps
	@missing=""; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	[ -x /usr/share/zookeeper/bin/zkServer.sh ] || missing="$$missing zookeeper"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	  else echo "missing Debian packages:$$missing (run make test as root, or install them)"; exit 1; fi; fi

$(STAMP): pyproject.toml setup.py refka/protocol/_record_walk.c | system-deps
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $(STAMP)

$(TSTAMP): pyproject.toml $(STAMP) | system-deps-test
	$(PIP) install -q -e '.[test]'
	touch $(TSTAMP)

install: $(STAMP)
install-test: $(TSTAMP)

js: $(JSDIR)/node_modules/.refka-installed

# KafkaJS and @platformatic/kafka, as package-lock.json pins them.
$(JSDIR)/node_modules/.refka-installed: $(JSDIR)/package.json $(JSDIR)/package-lock.json | system-deps-test
	cd $(JSDIR) && npm install --no-audit --no-fund --loglevel=error
	touch $@

clean:
	rm -rf $(VENV) $(JSDIR)/node_modules refka-data .pytest_cache

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

test: install-test js spark-jars java-clients kustomize go-clients kafka-oracle
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
	[ -x /usr/sbin/iptables ] || missing="$$missing iptables"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	  else echo "missing Debian packages:$$missing (run make test as root, or install them)"; exit 1; fi; fi

$(STAMP): pyproject.toml setup.py refka/protocol/_record_walk.c | system-deps
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $(STAMP)

$(TSTAMP): pyproject.toml $(STAMP) | system-deps-test
	$(PIP) install -q -e '.[test,pipeline]'
	touch $(TSTAMP)

install: $(STAMP)
install-test: $(TSTAMP)

js: $(JSDIR)/node_modules/.refka-installed

# KafkaJS and @platformatic/kafka, as package-lock.json pins them.
$(JSDIR)/node_modules/.refka-installed: $(JSDIR)/package.json $(JSDIR)/package-lock.json | system-deps-test
	cd $(JSDIR) && npm install --no-audit --no-fund --loglevel=error
	touch $@

# lab/pipeline, the Spark audit of lab runs: `make pipeline` installs pyspark and the rest of the
# `pipeline` extra (make test installs it with `test`) and Spark's Kafka connector: the jars
# lab/pipeline/pom.xml resolves beyond pyspark's own, copied by Maven into $(SPARK_JARS), where
# lab/pipeline/session.py points spark.jars (nothing is downloaded when a session starts).
SPARK_JARS := .cache/spark-jars
.PHONY: pipeline spark-jars
pipeline: install spark-jars
	$(PIP) install -q -e '.[pipeline]'

spark-jars: $(SPARK_JARS)/.refka-installed

$(SPARK_JARS)/.refka-installed: lab/pipeline/pom.xml
	@command -v mvn >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ]; then apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y maven; else echo "missing Debian package: maven"; exit 1; fi; }
	rm -rf $(SPARK_JARS)
	mvn -q -B -Dstyle.color=never -f lab/pipeline/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(CURDIR)/$(SPARK_JARS)
	touch $@

# Apache Kafka's Java client for tests/integration/test_java_client*.py: each version's
# kafka-clients and its runtime dependencies (codecs, slf4j with slf4j-simple), as
# tests/java/pom-<version>.xml names them, copied by Maven into .cache/java/kafka-clients-<version>/.
# The tests run tests/java/*.java on them with the JDK's source launcher (java -cp 'dir/*' X.java),
# so a JDK is needed, not only a JRE. They skip, naming this target, where the jars are missing.
JAVA_CLIENT_VERSIONS := 3.9.1 4.1.1
JAVA_CLIENTS := .cache/java
.PHONY: java-clients
java-clients: $(foreach v,$(JAVA_CLIENT_VERSIONS),$(JAVA_CLIENTS)/kafka-clients-$(v)/.refka-installed)

$(JAVA_CLIENTS)/kafka-clients-%/.refka-installed: tests/java/pom-%.xml
	@missing=""; command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v javac >/dev/null 2>&1 || missing="$$missing default-jdk-headless"; \
	if [ -n "$$missing" ]; then if [ "$$(id -u)" = 0 ]; then apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; else echo "missing Debian packages:$$missing"; exit 1; fi; fi
	rm -rf $(JAVA_CLIENTS)/kafka-clients-$*
	mvn -q -B -Dstyle.color=never -f tests/java/pom-$*.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(CURDIR)/$(JAVA_CLIENTS)/kafka-clients-$*
	touch $@

# Apache Kafka 3.9.1's broker, the oracle of tests/oracle/ (differential tests: the same requests to
# Kafka and to refka, the answers compared field by field): kafka_2.13 and its runtime dependencies,
# with slf4j-reload4j (Kafka's distribution's log4j 1.x binding), as tests/oracle/pom.xml names
# them, copied by Maven into $(KAFKA_ORACLE). The tests skip, naming this target, where it is missing.
KAFKA_ORACLE := .cache/kafka-3.9.1
.PHONY: kafka-oracle
kafka-oracle: $(KAFKA_ORACLE)/.refka-installed

$(KAFKA_ORACLE)/.refka-installed: tests/oracle/pom.xml
	@missing=""; command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v java >/dev/null 2>&1 || missing="$$missing default-jre-headless"; \
	if [ -n "$$missing" ]; then if [ "$$(id -u)" = 0 ]; then apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; else echo "missing Debian packages:$$missing"; exit 1; fi; fi
	rm -rf $(KAFKA_ORACLE)
	mvn -q -B -Dstyle.color=never -f tests/oracle/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(CURDIR)/$(KAFKA_ORACLE)
	touch $@

# Deployment (deploy/, README "Deployment"). kustomize from the Go module proxy renders the
# manifests for the offline checks of `make test` (tests/deploy; they skip, saying so, without Go).
# make kind-up, on a machine with Docker, kind and kubectl: the image, the kind cluster of
# deploy/kind/cluster.yaml (three workers in three zones), the kind overlay, every broker
# ready, the smoke Job (produce and consume through the internal listener); make kind-down
# deletes the cluster.
KUSTOMIZE_VERSION ?= v5.8.1
KUSTOMIZE    := .cache/bin/kustomize
KIND_CLUSTER ?= refka
KIND_IMAGE   := refka:dev
KUBECTL      := kubectl --context kind-$(KIND_CLUSTER)

.PHONY: kustomize kind-up kind-down
kustomize:
	@if [ -x $(KUSTOMIZE) ] && [ "$$($(KUSTOMIZE) version)" = "$(KUSTOMIZE_VERSION)" ]; then :; \
	elif command -v go >/dev/null 2>&1; then \
	  echo "go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION) -> $(KUSTOMIZE)"; \
	  GOBIN=$(CURDIR)/.cache/bin GOFLAGS=-mod=mod go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION); \
	else echo "no go on PATH: no $(KUSTOMIZE), the kustomize checks of tests/deploy will skip"; fi

kind-up:
	docker build -f deploy/Dockerfile -t $(KIND_IMAGE) .
	kind get clusters 2>/dev/null | grep -qx '$(KIND_CLUSTER)' \
	  || kind create cluster --name $(KIND_CLUSTER) --config deploy/kind/cluster.yaml
	kind load docker-image $(KIND_IMAGE) --name $(KIND_CLUSTER)
	$(KUBECTL) create namespace refka --dry-run=client -o yaml | $(KUBECTL) apply -f -
	$(KUBECTL) -n refka get secret refka-admin >/dev/null 2>&1 \
	  || $(KUBECTL) -n refka create secret generic refka-admin --from-literal=token=$$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	$(KUBECTL) apply -k deploy/k8s/overlays/kind
	$(KUBECTL) -n refka rollout status statefulset/zookeeper --timeout=300s
	$(KUBECTL) -n refka rollout status statefulset/refka --timeout=420s
	$(KUBECTL) -n refka delete job refka-smoke --ignore-not-found
	$(KUBECTL) apply -k deploy/k8s/smoke
	$(KUBECTL) -n refka wait --for=condition=complete job/refka-smoke --timeout=300s \
	  || { $(KUBECTL) -n refka logs job/refka-smoke; exit 1; }
	$(KUBECTL) -n refka logs job/refka-smoke
	@echo "refka is up: kind cluster $(KIND_CLUSTER), namespace refka, brokers refka-0..2 (zones zone-a..c)."
	@echo "  from this host, the external listener: 127.0.0.1:30092,127.0.0.1:30093,127.0.0.1:30094"
	@echo "    e.g. .venv/bin/refka topics describe -b 127.0.0.1:30092   or   kcat -b 127.0.0.1:30092 -L"
	@echo "  in the cluster, the internal listener: refka-headless.refka.svc.cluster.local:9092"
	@echo "  admin API and /metrics: $(KUBECTL) -n refka port-forward pod/refka-0 8080, then http://127.0.0.1:8080/"
	@echo "  admin token: $(KUBECTL) -n refka get secret refka-admin -o jsonpath='{.data.token}' | base64 -d"

kind-down:
	kind delete cluster --name $(KIND_CLUSTER)

# franz-go, the Go client (tests/go: its own go.mod and go.sum; franz-go and kadm come from the
# Go module proxy into Go's module cache): one binary, .cache/bin/refka-franz, which
# tests/integration/test_franz_go.py runs; rebuilt when a Go source, go.mod or go.sum changes.
# Without Go this says so and those tests skip, naming this target.
FRANZ     := .cache/bin/refka-franz
FRANZ_SRC := $(wildcard tests/go/*.go) tests/go/go.mod tests/go/go.sum
.PHONY: go-clients
go-clients: $(FRANZ)

$(FRANZ): $(FRANZ_SRC)
	@if command -v go >/dev/null 2>&1; then \
	  echo "go build tests/go -> $(FRANZ)"; mkdir -p $(@D) && \
	  cd tests/go && go build -buildvcs=false -o $(CURDIR)/$(FRANZ) .; \
	else echo "no go on PATH: no $(FRANZ), tests/integration/test_franz_go.py will skip (make go-clients)"; fi

clean:
	rm -rf $(VENV) $(JSDIR)/node_modules refka-data .pytest_cache

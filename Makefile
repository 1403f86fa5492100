# Thin targets over the `bundle` driver. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BUNDLE := $(BIN)/bundle
TOPOLOGY ?= pd
# engine (default): the pinned SGLang server on CPU with a small model made here, behind the real smg;
# sim: the worker simulator (seconds to start; DeepSeek-V4's server info, the knobs tune uses).
REHEARSAL ?= engine
# The rehearsal's bench: shorter prompts and answers than bundle.yaml's 256/256, which the CPU engine
# (about 10 output tok/s at C=8 on 2 cores) takes over ten minutes to serve at C=8 (measured 2026-12-02).
REHEARSE_BENCH ?= --input-len 32 --output-len 32
STAMP := $(VENV)/.installed
# inference-perf (the suite's independent client) needs Python >= 3.12: its own venv (see its rule).
CLIENT_VENV ?= .venv-inference-perf
CLIENT_STAMP := $(CLIENT_VENV)/.installed
# The documentation site's build (`make docs`) needs none of the dev install (torch, the Docker plugins,
# host packages): a light venv of its own with requirements/docs.txt's hashed closure (mkdocs, its theme,
# the driver's dependencies with matplotlib, promql-parser; 370 MB, 34 s once from a fresh clone on
# 2 cores, 2026-12-06). bundle/ and docsgen/ are read from the tree.
DOCS_VENV ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
# The first CPython 3.12 that runs: python3.12 on PATH (a pyenv shim may be there and refuse), then pyenv's.
PYTHON312 ?= $(shell for p in $$(command -v python3.12) $$(ls -d $$HOME/.pyenv/versions/3.12.*/bin/python 2>/dev/null); do \
  "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$$p"; break; }; done)

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Two installs into the same .venv: the driver alone (launch, rehearse and every verb: seconds and
# megabytes, no torch; everything of a rehearsal runs in containers) and the dev install on top of it
# (`make test`: test tools and the pinned SGLang/smg/NIXL parsers, gigabytes). Each re-installs only
# when its inputs changed.
DRIVER := $(VENV)/.driver-installed

driver: $(DRIVER) ## install only the driver (`bundle`) and what it imports into .venv, plus the compose and buildx plugins if missing

$(DRIVER): $(BIN)/python pyproject.toml docker/install-compose.sh docker/install-buildx.sh
	$(BIN)/pip install -q -e .
	@docker/install-compose.sh $(BIN)
	@# A Docker 23+ CLI refuses BuildKit builds without buildx (the images and the rehearsal use BuildKit).
	@docker buildx version >/dev/null 2>&1 || docker/install-buildx.sh
	@touch $(DRIVER)

install: $(STAMP) $(DOCS_STAMP) ## the dev install: the driver plus test tools, the pinned parsers (torch, sglang, smg, nixl), hadolint; host packages (debootstrap ...); the docs' venv

# The dev install's gigabytes go in through uv (requirements/dev.txt's own `uv` spec, put in by pip
# first): the same versions as pip resolves (compared package by package, 2026-12-06), in 25 s with an
# empty cache and 2 s with a warm one, where pip took 125 s every time (it caches no download here).
UV := $(BIN)/uv
UV_INSTALL = $(UV) pip install -q --python

$(UV): $(BIN)/python requirements/dev.txt
	$(BIN)/pip install -q "$$(grep -E '^uv[=<>~ ]' requirements/dev.txt | sed 's/ *#.*//')"
	@touch $(UV)

$(STAMP): $(DRIVER) $(UV) requirements/dev.txt requirements/sglang-nodeps.txt docker/host-packages.sh $(CLIENT_STAMP)
	@# debootstrap, patchelf, docker-registry from Debian (as root; otherwise it says the sudo command).
	docker/host-packages.sh
	$(UV_INSTALL) $(BIN)/python -r requirements/dev.txt
	$(UV_INSTALL) $(BIN)/python --no-deps -r requirements/sglang-nodeps.txt
	@touch $(STAMP)

# inference-perf, the suite's independent benchmark client, needs Python >= 3.12: its own venv, from a
# CPython 3.12 on PATH or pyenv's (PYTHON312 overrides), with the hashed closure of requirements/.

$(CLIENT_STAMP): $(UV) requirements/inference-perf.txt
	@test -n "$(PYTHON312)" || { echo "inference-perf needs a CPython 3.12: install one (python3.12 on PATH) or set PYTHON312=/path/to/python3.12"; exit 2; }
	$(PYTHON312) -m venv $(CLIENT_VENV)
	$(UV_INSTALL) $(CLIENT_VENV)/bin/python --require-hashes -r requirements/inference-perf.txt
	@touch $(CLIENT_STAMP)

# Two tiers, fast first: a failure among the tests that start no container, reach no network and take
# seconds stops the run before the second tier's minutes (Docker: tests/e2e/ and the image builds;
# network: resolving the locks against the live index, skipped when it does not answer; slow: kernels
# compiled on CPU, the real router in front of simulator processes). Each tier prints its
# slowest tests; coverage of bundle/ is collected by both (the second appends to the first's data)
# and reported after each. Pytest exits 5 when a tier selects nothing (a narrowing PYTEST_ARGS): that
# is no failure. GPU tests and those needing a Kubernetes cluster never run here. Under CI (CI=true)
# a test whose dependency is missing (a module of this install, a tool, the engine, the index) fails,
# naming it, instead of skipping (tests/conftest.py).
PYTEST_TIER := $(BIN)/python -m pytest -p no:cacheprovider --durations=15 --cov=bundle --cov-report=term:skip-covered
# The fast tier runs on TEST_WORKERS processes too: on one it is CPU-bound and leaves a core idle
# (2026-12-04: 270 s on one at load 1.1; 160 s on 2 workers, 790 passed). In the second tier a
# module stays on one worker, with its module fixtures. Most of its time is waiting (containers
# starting, health intervals, restart back-offs, simulated token times): in the 2026-12-02 cold CI
# run the 2 cores sat 50-70% idle during the simulator e2e tests. Each worker launches its own
# shared rehearsals.
TEST_WORKERS ?= 2
# The Docker tier's workers on a warm engine, where nothing builds beside it (tests/second-tier.sh
# chooses; TEST_WORKERS while images build). The same two by default: on 2 cores a third worker was
# slower, not faster (2026-12-06, warm: the cores 100% busy from the first minute, the tier past 32 min
# when stopped against 30.5 min on two). A machine with more cores than workers can give the warm tier more.
WARM_TEST_WORKERS ?= $(TEST_WORKERS)
test: $(STAMP) ## fast tier (no containers, no network, seconds; stops on a failure), then the images the Docker tier stands on (progress shown, reused when present), then the slow, Docker and network tier
	BUNDLE_TIER=fast $(PYTEST_TIER) -n $(TEST_WORKERS) --dist loadfile \
	  -m "not docker and not network and not slow and not gpu and not cluster" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	@# tests/second-tier.sh: the rehearsal image and the chain below it (base, framework, pd) first, then
	@# the tier, with the chain's upper layers (the real kernels layer: FlashInfer's modules for 12.0a, the
	@# fused MoE cut to MXFP8 x MXFP4, TileLang's 31 indexer kernels; `make image` builds the same on the
	@# GPU host with every core) built beside it on half the cores; the audit and the chain's own tests
	@# go last and wait for it (docs/testing.md). Built here, not inside a test, so a cold engine's build
	@# shows its progress (and no two workers build the same image). Not beside the fast tier: on 2
	@# cores that was slower in all (2026-12-04: the fast tier took 260 s instead of 121 s).
	BIN=$(BIN) BUNDLE_TIER=docker TEST_WORKERS=$(TEST_WORKERS) WARM_TEST_WORKERS=$(WARM_TEST_WORKERS) \
	  tests/second-tier.sh $(PYTEST_TIER) --cov-append -n auto --dist loadfile \
	  -m "(docker or network or slow) and not gpu and not cluster and not heavy" $(PYTEST_ARGS) || [ $$? -eq 5 ]

test-heavy: $(STAMP) ## the tests CI's budget has no room for (the classic builder's copy of the whole image, 12 min): run them deliberately
	$(BIN)/python -m pytest -p no:cacheprovider -m "heavy and not gpu" $(PYTEST_ARGS)

launch: $(DRIVER) ## GPU host: check its GPUs (doctor), build the pinned image (reusing every layer built), launch TOPOLOGY, wait until ready
	@# A host without NVIDIA GPUs stops here, before minutes of image build.
	$(BUNDLE) doctor $(TOPOLOGY) --only driver --only gpus --only docker --only nvidia-runtime \
	  --require driver --require gpus $(if $(CONFIG),-c $(CONFIG))
	$(BUNDLE) build
	$(BUNDLE) launch $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

rehearse: $(DRIVER) ## any Docker host: rehearse TOPOLOGY on the real SGLang server on CPU (REHEARSAL=sim: simulators), then smoke, bench and down
	$(BUNDLE) launch $(TOPOLOGY) --rehearsal $(REHEARSAL) $(if $(CONFIG),-c $(CONFIG))
	@# Down runs whatever smoke and bench said; the exit code is theirs.
	$(BUNDLE) smoke $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG)) && \
	  $(BUNDLE) bench $(TOPOLOGY) $(REHEARSE_BENCH) $(if $(CONFIG),-c $(CONFIG)); rc=$$?; \
	  $(BUNDLE) down $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG)); exit $$rc

smoke: $(DRIVER) ## smoke-test the running TOPOLOGY (health, Paris, streaming, determinism, PD path)
	$(BUNDLE) smoke $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

bench: $(DRIVER) ## benchmark the running TOPOLOGY with SGLang's bench_serving (C=1 and 8)
	$(BUNDLE) bench $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

down: $(DRIVER) ## stop TOPOLOGY (cache volumes kept)
	$(BUNDLE) down $(TOPOLOGY) $(if $(CONFIG),-c $(CONFIG))

validate: $(DRIVER) ## check the config for both topologies (CONFIG=bundle.yaml to pick a file)
	$(BUNDLE) validate $(if $(CONFIG),-c $(CONFIG))

argspec: $(STAMP) ## refresh the parser snapshots from the pinned sglang / smg in .venv
	$(BIN)/python -m bundle.rules.argspec --write

.PHONY: help driver install test test-heavy launch rehearse smoke bench down validate argspec

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

lint: $(STAMP) ## hadolint every Dockerfile (ignores justified in .hadolint.yaml), actionlint on the workflows, ruff on the Python
	$(BIN)/hadolint --config .hadolint.yaml docker/*.Dockerfile
	$(BIN)/actionlint .github/workflows/*.yml
	$(BIN)/ruff check bundle tests benchmarks kernels docsgen

# The documentation site: guides under docs/, reference pages generated from the code when it is built
# (docsgen/, never committed). --strict: a broken internal link or anchor, or a page missing from the
# navigation, fails. External links need the network: `make docs-links`, run by a maintainer online.
MKDOCS_ENV := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true PYTHONPATH=$(CURDIR)

$(DOCS_STAMP): requirements/docs.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install -q --require-hashes -r requirements/docs.txt
	@touch $(DOCS_STAMP)

docs: $(DOCS_STAMP) ## build the documentation site into site/ (--strict; reference pages generated from the code); needs only its own venv
	@# No --quiet: mkdocs 1.6 then drops the warnings before --strict counts them (a broken link passed).
	$(MKDOCS_ENV) $(DOCS_VENV)/bin/mkdocs build --strict

docs-links: docs ## online, not in CI: fetch every external link of the built site, exit 1 naming the broken ones
	$(MKDOCS_ENV) $(DOCS_VENV)/bin/python -m docsgen.links site

image-standin: $(STAMP) ## no GPU or registry: build every layer, framework included, on the stand-in base (Debian + CPython 3.12)
	$(BUNDLE) build --standin

audit: $(STAMP) ## check an image from inside: IMAGE=ref (default the lock's image; STANDIN=1 the stand-in build's)
	$(BUNDLE) audit $(if $(IMAGE),--image $(IMAGE),$(if $(STANDIN),--standin)) $(if $(CONFIG),-c $(CONFIG))

.PHONY: image image-plan image-standin audit lock upgrade-check buildx lint docs docs-links

# ---- rehearsal (bundle/rehearsal/simulator, docker/rehearsal.Dockerfile, compose/rehearsal-*.yaml) ----
rehearsal-image: $(STAMP) ## build the rehearsal image (SGLang on CPU + simulator, real router, bench_serving) on the stand-in pd layer if its inputs changed
	$(BIN)/python -m bundle.rehearsal.shared.image image

.PHONY: rehearsal-image

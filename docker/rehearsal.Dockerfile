# The rehearsal image: the worker simulator (bundle/simulator), the REAL router (smg 1.13.0) and
# SGLang 0.5.23's bench_serving, on the local Debian root (docker/debian-root.sh). No GPU, no CUDA
# base, no registry: it builds and runs anywhere a Docker engine does, for `bundle launch --rehearsal`
# and CI. Build: `make rehearsal-image` (or bundle.rehearsal.ensure_image()), context = repo root:
#   DOCKER_BUILDKIT=1 docker build -f docker/rehearsal.Dockerfile -t sglang-bundle/rehearsal:TAG .
# No `# syntax=` line on purpose: it would pull the Dockerfile frontend from Docker Hub; the engine's
# built-in BuildKit frontend already understands the cache mounts below.
ARG BASE_IMAGE=sglang-bundle/debian-root:bookworm
FROM ${BASE_IMAGE}

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_LINK_MODE=copy \
    # Trust the system CA store (debian-root carries the host's, TLS interception included).
    UV_SYSTEM_CERTS=1 \
    UV_PYTHON=/opt/venv/bin/python \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1

# The installer, from PyPI with hashes, into its own venv so it is not part of the runtime one.
COPY requirements/rehearsal-tools.txt /tmp/req/
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/tools \
 && /opt/tools/bin/pip install --require-hashes --no-deps -r /tmp/req/rehearsal-tools.txt \
 && python3 -m venv /opt/venv

# The heavy layer (torch + its CUDA libraries from PyPI, several GB): every pin exact and hashed.
# Only a change to these files rebuilds it; the uv cache mount makes a rebuild a local copy.
COPY requirements/rehearsal.txt requirements/rehearsal-nodeps.txt /tmp/req/
RUN --mount=type=cache,target=/root/.cache/uv \
    /opt/tools/bin/uv pip install --require-hashes -r /tmp/req/rehearsal.txt \
 && /opt/tools/bin/uv pip install --require-hashes --no-deps -r /tmp/req/rehearsal-nodeps.txt \
 && python -c "import importlib.util as u, smg.launch_router, sglang.benchmark.serving, sglang.srt.server_args, tokenizers; assert u.find_spec('sglang_router') is None"

# The shared entrypoint (API key from the compose secret), as in the real images.
COPY docker/entrypoint.sh /usr/local/bin/bundle-entrypoint
# The lock: the simulator reports its SGLang pin as the version a real server would.
COPY docker/lock.toml /opt/bundle/lock.toml
# The simulator alone (not the driver), and the simulated model folder at a fixed path so
# bench_serving finds a tokenizer even without the /model mount.
COPY bundle/__init__.py /opt/simulator/bundle/__init__.py
COPY bundle/simulator /opt/simulator/bundle/simulator
RUN chmod 0755 /usr/local/bin/bundle-entrypoint \
 && ln -s /opt/simulator/bundle/simulator/simulated_model /opt/simulated-model \
 && printf '#!/bin/sh\n# The worker simulator; takes `python3 -m sglang.launch_server ARGS` as its arguments.\nexec python -m bundle.simulator "$@"\n' \
      > /usr/local/bin/sglang-worker-simulator \
 && chmod 0755 /usr/local/bin/sglang-worker-simulator \
 && PYTHONPATH=/opt/simulator python -c "import bundle.simulator.server"
ENV PYTHONPATH=/opt/simulator

# Last, so a new version string does not invalidate the cached layers above (build args in
# scope are part of every later RUN's cache key).
ARG VERSION=dev
LABEL org.opencontainers.image.title="sglang-bundle rehearsal (worker simulator + smg + bench_serving)" \
      org.opencontainers.image.source="https://github.com/sglang-sm120-bundle" \
      org.opencontainers.image.version="${VERSION}" \
      io.sglang-bundle.image="rehearsal"

ENTRYPOINT ["bundle-entrypoint"]
CMD ["sglang-worker-simulator", "--help"]

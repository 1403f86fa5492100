# Layer 2 of 5, framework: torch (CUDA 13.0 build), SGLang, sglang-kernel, FlashInfer, tilelang
# and their whole resolved closure from docker/requirements/framework.txt, installed with every
# hash required and no resolver at build time (the lock is the closure).
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120:base
FROM ${PARENT_IMAGE}

# "pypi" installs the sglang wheel pinned in the lock; "git" then replaces its Python package with
# SGLang's python/ folder at SGLANG_GIT_COMMIT (the original stack ran main), keeping every other pin.
ARG SGLANG_SOURCE=pypi
ARG SGLANG_GIT_REPO=https://github.com/sgl-project/sglang.git
ARG SGLANG_GIT_COMMIT=""

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY docker/requirements/framework.txt /opt/bundle/requirements/framework.txt
# The uv cache mount (base.Dockerfile says why) makes a rebuild a local copy, not gigabytes again.
RUN --mount=type=cache,target=/root/.cache/uv,sharing=locked \
    UV_NO_CACHE=0 UV_LINK_MODE=copy uv pip install --require-hashes --no-deps -r /opt/bundle/requirements/framework.txt

RUN --mount=type=cache,target=/root/.cache/uv,sharing=locked \
    if [ "${SGLANG_SOURCE}" = "git" ]; then \
      test -n "${SGLANG_GIT_COMMIT}" || { echo "SGLANG_GIT_COMMIT is empty" >&2; exit 1; }; \
      mkdir -p /opt/sglang-src \
      && curl -fsSL "${SGLANG_GIT_REPO%.git}/archive/${SGLANG_GIT_COMMIT}.tar.gz" \
         | tar -xz -C /opt/sglang-src --strip-components=1 \
      && UV_NO_CACHE=0 UV_LINK_MODE=copy uv pip install --no-deps --no-build-isolation --reinstall-package sglang \
           /opt/sglang-src/python; \
    fi \
 && python -c "import sglang, torch; print('sglang', sglang.__version__, 'torch', torch.__version__)"

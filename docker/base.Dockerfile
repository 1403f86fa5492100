# Layer 1 of 5, base: the CUDA 13.0 devel image (pinned tag@sha256 in docker/lock.toml), Python
# with its headers (Triton, TVM and DeepGEMM compile C/C++ at run time), a host compiler, and uv
# in a virtual environment at /opt/venv that every upper layer installs into.
# Build arguments come from docker/lock.toml through `bundle build` or docker-bake.hcl.
ARG BASE_IMAGE=nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04
FROM ${BASE_IMAGE}

# Ubuntu snapshot (snapshot.ubuntu.com) that fixes every apt package version; "" only for the
# Debian stand-in used in CI, whose apt has no --snapshot.
ARG APT_SNAPSHOT=""
ARG PYTHON_VERSION=3.12
ARG CUDA_VERSION=13.0.2
ARG TORCH_CUDA_ARCH_LIST=12.0a

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/cuda/bin:${PATH} \
    CUDA_HOME=/usr/local/cuda \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} \
    FLASHINFER_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} \
    CUDAARCHS=120a \
    UV_NATIVE_TLS=1 \
    # Every module uv installs is compiled to bytecode at install time (uv's advice for images). The
    # image writes no bytecode at run time (PYTHONDONTWRITEBYTECODE above: a read-only root, no stray
    # files), so without this every process (each server, each TP rank) would compile torch's and
    # SGLang's modules from source again at every start (benchmarks/startup_imports.py measures it).
    UV_COMPILE_BYTECODE=1 \
    # uv caches nothing in the image (nor at run time); each install step below turns the cache on
    # (UV_NO_CACHE=0) inside its BuildKit cache mount, copying out of it (UV_LINK_MODE=copy).
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never

# The CUDA apt repository is dropped: the toolkit comes pinned inside the base image, and an
# unpinned repository must not upgrade it. Package versions are fixed by the snapshot.
# Package caches live in BuildKit cache mounts, never in the image: a rebuild (another snapshot, a
# changed layer below) downloads only what changed. The image's docker-clean hook would empty the
# apt cache after each install, so apt is told to keep what it downloaded (into the mount).
# `bundle build` without buildx drops the mounts and empties their folders in the same step
# (bundle/images/legacy.py), so the image is the same either way.
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/sources.list.d/cuda*.list /etc/apt/apt.conf.d/docker-clean \
 && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-downloads \
 && if [ -n "${APT_SNAPSHOT}" ]; then apt-get update --snapshot "${APT_SNAPSHOT}"; else apt-get update; fi \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl build-essential python3 python3-dev python3-venv \
 && python3 -c "import sys; v='%d.%d' % sys.version_info[:2]; assert v == '${PYTHON_VERSION}', \
      f'python3 is {v}, the lock pins ${PYTHON_VERSION}'"

COPY docker/requirements/base.txt /opt/bundle/requirements/base.txt
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --disable-pip-version-check --require-hashes --no-deps \
      -r /opt/bundle/requirements/base.txt \
 && uv --version

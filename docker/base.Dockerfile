# Layer 1 of 6, base: the project's own base, the same here and on a GPU host (no registry base):
# the Debian bookworm root with CPython 3.12 under /usr/local (docker/lock.toml [standin]), a host
# compiler and ninja (Triton, TVM, FlashInfer's and tilelang's JIT compile C/C++/CUDA at run time),
# the ONE CUDA toolchain of the lock's [cuda] from PyPI wheels linked as /usr/local/cuda, the
# environment the NVIDIA container toolkit reads, and uv in a virtual environment at /opt/venv that
# every upper layer installs into. Build arguments come from docker/lock.toml through `bundle build`
# or docker-bake.hcl.
ARG BASE_IMAGE=sglang-bundle/standin-base:bookworm-py3.12
FROM ${BASE_IMAGE}

# A snapshot point for an apt that has one (Ubuntu's); "" on the Debian root, whose apt has none.
ARG APT_SNAPSHOT=""
ARG PYTHON_VERSION=3.12
ARG CUDA_VERSION=13.0
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
    # What the NVIDIA container toolkit reads (the nvidia/cuda images set the same): every GPU unless
    # the runtime narrows it, the compute and nvidia-smi libraries, and a driver floor it checks at
    # start with its own message ("unsatisfied condition: cuda>=13.0") before anything loads.
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=${CUDA_VERSION}" \
    # Where the toolkit's older setups mount the driver libraries (it also writes them to the
    # loader's cache); libcuda.so.1 comes from the host, never from this image.
    LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
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

# Package caches live in BuildKit cache mounts, never in the image: a rebuild downloads only what
# changed. A docker-clean hook (the Debian images have one) would empty the apt cache after each
# install, so apt is told to keep what it downloaded (into the mount).
# `bundle build` without buildx drops the mounts and empties their folders in the same step
# (bundle/images/legacy.py), so the image is the same either way.
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean \
 && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-downloads \
 && if [ -n "${APT_SNAPSHOT}" ]; then apt-get update --snapshot "${APT_SNAPSHOT}"; else apt-get update; fi \
 && apt-get install -y --no-install-recommends ca-certificates curl build-essential ninja-build binutils \
 && python3 -c "import sys; v='%d.%d' % sys.version_info[:2]; assert v == '${PYTHON_VERSION}', \
      f'python3 is {v}, the lock pins ${PYTHON_VERSION}'"

# uv, setuptools and the CUDA toolchain wheels, hashes required; then /usr/local/cuda from them.
COPY docker/requirements/base.txt /opt/bundle/requirements/base.txt
COPY docker/cuda-home.sh docker/cuda-stub.py /opt/bundle/
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --disable-pip-version-check --require-hashes --no-deps \
      -r /opt/bundle/requirements/base.txt \
 && uv --version \
 && /opt/bundle/cuda-home.sh

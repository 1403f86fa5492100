# Layer 4 of 6, kernels: FlashInfer's JIT modules the predicted choices load on sm_120, compiled for
# the lock's arch (12.0a) at build time with the base layer's one nvcc, into flashinfer/data/aot/,
# which FlashInfer's loader checks before its JIT cache: the first start compiles none of them.
# KERNELS (`name=module:function` words) comes from bundle/images/kernels_jit.py through `bundle build`.
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120:pd
FROM ${PARENT_IMAGE}

ARG KERNELS=""

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# One step, so one layer: on a fuse-overlayfs engine (this project's CI) every layer's export walks
# the whole tree below it, 8-9 s a layer above the framework (2026-12-04). The script comes in
# through a bind mount of the context and is installed in the same step (the legacy builder gets a
# COPY instead: bundle/images/legacy.py).
# The FlashInfer workspace (objects, build.ninja) is a BuildKit cache mount: a rebuild with the
# same sources and flags recompiles nothing; the image holds only the linked modules. MAX_JOBS:
# parallel nvcc jobs, every core of the building host (not a build argument: the layer's key and
# contents stay the same on any host).
RUN --mount=type=cache,target=/var/cache/kernels-build,sharing=locked \
    --mount=type=bind,source=docker/kernels-build.py,target=/tmp/bundle-context/kernels-build.py \
    --mount=type=bind,source=docker/kernels_narrow.py,target=/tmp/bundle-context/kernels_narrow.py \
    --mount=type=bind,source=docker/tilelang-prebuild.py,target=/tmp/bundle-context/tilelang-prebuild.py \
    test -n "${KERNELS}" || { echo "KERNELS is empty: bundle build passes it" >&2; exit 1; }; \
    for f in kernels-build.py kernels_narrow.py tilelang-prebuild.py; do \
      install -D -m 0644 "/tmp/bundle-context/$f" "/opt/bundle/$f" || exit 1; done \
 && FLASHINFER_WORKSPACE_BASE=/var/cache/kernels-build MAX_JOBS="$(nproc)" PYTHONPATH=/opt/bundle \
      python /opt/bundle/kernels-build.py ${KERNELS} \
 && python /opt/bundle/tilelang-prebuild.py /opt/bundle/tilelang-cache /opt/bundle/kernels.json

# Layer 5 of 5, runtime: what a container needs to run, not to build: a non-root user, the
# entrypoint, a healthcheck, the sm_120 environment defaults and the JIT cache paths. Cheap to
# rebuild: it is the only layer that changes with every lock.
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120:overlay
FROM ${PARENT_IMAGE}

ARG LOCK_HASH=unknown
# sha256 of the CycloneDX SBOM of /opt/venv that `bundle build` writes next to the lock (made from
# the overlay image, whose venv this layer does not change); "" when built without it (bake).
ARG SBOM_SHA256=""

# JIT caches (Triton, FlashInfer, DeepGEMM, tilelang, TorchInductor, CuTe DSL, TVM FFI) under one
# root meant to be a volume; the lock hash is part of the path, so a volume that outlives an image
# is never read by a different stack.
ENV BUNDLE_LOCK_HASH=${LOCK_HASH} \
    JIT_CACHE_ROOT=/var/cache/sglang/lock-${LOCK_HASH}
ENV TRITON_CACHE_DIR=${JIT_CACHE_ROOT}/triton \
    FLASHINFER_WORKSPACE_BASE=${JIT_CACHE_ROOT}/flashinfer \
    SGLANG_DG_CACHE_DIR=${JIT_CACHE_ROOT}/deep_gemm \
    DG_JIT_CACHE_DIR=${JIT_CACHE_ROOT}/deep_gemm \
    TILELANG_CACHE_DIR=${JIT_CACHE_ROOT}/tilelang \
    TORCHINDUCTOR_CACHE_DIR=${JIT_CACHE_ROOT}/inductor \
    CUTE_DSL_CACHE_DIR=${JIT_CACHE_ROOT}/cute_dsl \
    XDG_CACHE_HOME=${JIT_CACHE_ROOT}/xdg \
    HOME=/home/sglang \
    SGLANG_PORT=30000

# One step, so one layer: on a fuse-overlayfs engine (this project's CI) every layer's export walks
# the whole tree below it, 8-9 s a layer above the framework (2026-12-04). The files come in through
# a bind mount of the context's docker/ and are installed in the same step (the legacy builder gets a
# COPY instead: bundle/images/legacy.py). The SBOM is optional in the context (the bake file builds
# without one). uid 10001 (numeric in USER so the host resolves it): Ubuntu 24.04 images already
# hold uid 1000.
RUN --mount=type=bind,source=docker,target=/tmp/bundle-context/docker \
    install -m 0755 /tmp/bundle-context/docker/entrypoint.sh /usr/local/bin/bundle-entrypoint \
 && install -D -m 0644 /tmp/bundle-context/docker/lock.toml /opt/bundle/lock.toml \
 && if [ -f /tmp/bundle-context/docker/sbom.cdx.json ]; then \
      install -m 0644 /tmp/bundle-context/docker/sbom.cdx.json /opt/bundle/sbom.cdx.json; fi \
 && useradd --uid 10001 --user-group --create-home --home-dir /home/sglang --shell /usr/sbin/nologin sglang \
 && mkdir -p /var/cache/sglang "${JIT_CACHE_ROOT}" \
 && chown -R sglang:sglang /var/cache/sglang

LABEL io.sglang-bundle.sbom-sha256=${SBOM_SHA256}
USER 10001:10001
WORKDIR /home/sglang
VOLUME ["/var/cache/sglang"]
# The server port inside the container; the healthcheck follows SGLANG_PORT if compose sets another.
EXPOSE 30000
HEALTHCHECK --interval=30s --timeout=10s --start-period=20m --retries=3 \
  CMD ["/bin/sh", "-c", "curl -fsS \"http://127.0.0.1:${SGLANG_PORT}/health\" || exit 1"]
ENTRYPOINT ["/usr/local/bin/bundle-entrypoint"]
CMD ["python", "-m", "sglang.launch_server", "--help"]

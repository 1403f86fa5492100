# The rehearsal image: ONE image for both rehearsals, built FROM the stand-in chain's pd layer
# (`bundle build --standin`; bundle/rehearsal/shared/image.py names the parent from the lock through
# bundle/images/build.py's plan). That layer already holds the lock's own hashed closure on CPython
# 3.12: torch 2.14.1, SGLang 0.5.23 with every dependency (the CPU engine's imports included:
# xgrammar, llguidance, openai, tiktoken, uvloop, ...), nixl 1.5.1 (nixl-cu13) and smg 1.13.0.
# This file adds ONLY:
#   - the stand-in `sgl_kernel` (docker/engine/sgl_kernel: every name raises if called), first on
#     PYTHONPATH so it shadows the real sglang-kernel, whose CUDA extensions cannot load without a GPU;
#   - the NIXL memory-type patch (docker/engine/nixl-dram.patch: the KV buffers are host memory,
#     registered as DRAM), applied with `patch --fuzz=0`: the build fails unless it applies exactly;
#   - the NIXL progress-thread patch (docker/engine/nixl-progress-wait.patch: nixl's agent waits up to
#     1 ms between its progress thread's passes instead of spinning a core), applied the same way;
#   - top_level.txt declared for the distributions without one (docker/engine/declare_top_level.py:
#     the same names Python infers; each process's `import transformers` stops stat-ing every file
#     of their RECORDs, 3 s per process on a fuse-overlayfs engine);
#   - the worker simulator (bundle/rehearsal/simulator) for `--rehearsal sim`, and the model trainer.
# Neither the stand-in nor the patches ever reach a GPU image: they live in this file only.
# No `# syntax=` line on purpose: it would pull the Dockerfile frontend from Docker Hub.
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120-standin:pd
FROM ${PARENT_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1

# The stand-in first: it shadows site-packages' sgl_kernel for every process of this image.
ENV PYTHONPATH=/opt/bundle/engine/standins:/opt/simulator

# ONE step, so one layer: on a fuse-overlayfs engine (this project's CI) every layer's export walks the
# whole 11 GB tree below it, 8-9 s each measured on 2026-12-04; this file's ten COPY and RUN steps
# took 3.5 minutes to export. The checkout's files are bind-mounted from the context (only what
# rehearsal.Dockerfile.dockerignore lets through) and installed here, in this order:
#   1. the files: the patch, the stand-in, the trainer, the entrypoint, the lock, the simulator;
#   2. the NIXL patches: any hunk that does not apply exactly (no fuzz; already applied counts as not
#      applying) makes patch exit non-zero, and the build stops;
#   3. the simulator's launcher;
#   3b. top_level.txt for every distribution that lacks one (docker/engine/declare_top_level.py: the
#      names Python infers, written once, so each process's `import transformers` stops checking
#      33,510 files through the FUSE daemon: 3 s of every SGLang process and bench_serving level);
#   4. the imports both rehearsals run: SGLang's server (CPU engine), the simulator, smg and
#      bench_serving, and the `nixl._api` SGLang's NIXL backend imports when pd starts (the lock once
#      lacked it: pd failed only at decode's start); sgl_kernel must be the stand-in.
RUN --mount=type=bind,target=/tmp/bundle-context \
    install -D -m 0644 /tmp/bundle-context/docker/engine/nixl-dram.patch /opt/bundle/engine/nixl-dram.patch \
 && install -D -m 0644 /tmp/bundle-context/docker/engine/train_model.py /opt/bundle/engine/train_model.py \
 && install -D -m 0644 /tmp/bundle-context/bundle/__init__.py /opt/simulator/bundle/__init__.py \
 && install -D -m 0644 /tmp/bundle-context/bundle/rehearsal/__init__.py /opt/simulator/bundle/rehearsal/__init__.py \
 && mkdir -p /opt/bundle/engine/standins \
 && cp -R /tmp/bundle-context/docker/engine/sgl_kernel /opt/bundle/engine/standins/ \
 && cp -R /tmp/bundle-context/bundle/rehearsal/simulator /opt/simulator/bundle/rehearsal/ \
 && install -m 0755 /tmp/bundle-context/docker/entrypoint.sh /usr/local/bin/bundle-entrypoint \
 && install -m 0644 /tmp/bundle-context/docker/lock.toml /opt/bundle/lock.toml \
 && site=$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])") \
 && patch -d "$site" -p1 --forward --fuzz=0 --no-backup-if-mismatch < /opt/bundle/engine/nixl-dram.patch \
 && patch -d "$site" -p1 --forward --fuzz=0 --no-backup-if-mismatch < /tmp/bundle-context/docker/engine/nixl-progress-wait.patch \
 && ln -s /opt/simulator/bundle/rehearsal/simulator/simulated_model /opt/simulated-model \
 && printf '#!/bin/sh\n# The worker simulator; takes `python3 -m sglang.launch_server ARGS` as its arguments.\nexec python -m bundle.rehearsal.simulator "$@"\n' \
      > /usr/local/bin/sglang-worker-simulator \
 && chmod 0755 /usr/local/bin/sglang-worker-simulator \
 && python /tmp/bundle-context/docker/engine/declare_top_level.py \
 && SGLANG_USE_CPU_ENGINE=1 python -c "import sgl_kernel, sglang.srt.entrypoints.http_server, sglang.srt.disaggregation.nixl.conn, sglang.benchmark.serving, smg.launch_router, bundle.rehearsal.simulator.server; from nixl._api import nixl_agent; assert sgl_kernel.__file__.startswith('/opt/bundle/engine/standins/'), sgl_kernel.__file__; print('rehearsal image: imports ok')"

# Last, so a new version string does not invalidate the cached layers above.
ARG VERSION=dev
LABEL org.opencontainers.image.title="sglang-bundle rehearsal (SGLang 0.5.23 CPU engine + worker simulator + smg + bench_serving)" \
      org.opencontainers.image.version="${VERSION}" \
      io.sglang-bundle.image="rehearsal"

ENTRYPOINT ["bundle-entrypoint"]
CMD ["sglang-worker-simulator", "--help"]

# A node of the rehearsal Slurm cluster (bundle/slurm/cluster.py, compose/slurm-cluster.yaml): the
# rehearsal image (the real SGLang CPU engine, the worker simulator, smg, bench_serving) plus Debian
# bookworm's own Slurm 22.05 and MUNGE, so the job's steps run the rehearsal's workers natively on
# the node: pyxis/enroot cannot run inside a container here. One image for the controller and the
# node daemons; the entrypoint's argument says which (docker/slurm/node-entrypoint.sh).
# Built once per hash of its inputs (bundle/slurm/image.py), tagged sglang-bundle/slurm-node:<hash>.
# No `# syntax=` line on purpose: it would pull the Dockerfile frontend from Docker Hub.
ARG PARENT_IMAGE=sglang-bundle/rehearsal:latest
FROM ${PARENT_IMAGE}
# Pinned exactly (Debian bookworm + bookworm-security, 2026-12): every Slurm package of the same build.
ARG SLURM_VERSION=22.05.8-4+deb12u3
ARG MUNGE_VERSION=0.5.15-2+deb12u1

# The rehearsal image runs as root (the daemons need it); apt too.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# One step, so one layer: on a fuse-overlayfs engine (this project's CI) every layer's export walks the
# whole 11 GB tree below it, 8-9 s each measured on 2026-12-04. apt's downloads and lists live in
# BuildKit cache mounts, never in the image (as in base.Dockerfile); the entrypoint is bind-mounted
# from the context and installed in the same step.
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    --mount=type=bind,source=docker/slurm/node-entrypoint.sh,target=/tmp/node-entrypoint.sh \
    rm -f /etc/apt/apt.conf.d/docker-clean \
 && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-downloads \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "slurmctld=${SLURM_VERSION}" "slurmd=${SLURM_VERSION}" "slurm-client=${SLURM_VERSION}" \
      "slurm-wlm-basic-plugins=${SLURM_VERSION}" "munge=${MUNGE_VERSION}" "libmunge2=${MUNGE_VERSION}" \
 && slurmctld -V && slurmd -V && munged --version \
 && install -m 0755 /tmp/node-entrypoint.sh /usr/local/bin/slurm-node

LABEL io.sglang-bundle.image="slurm-node"
ENTRYPOINT ["/usr/local/bin/slurm-node"]
CMD ["node"]

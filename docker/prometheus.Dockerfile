# Prometheus for the monitoring profile (compose/monitoring.yaml): Debian bookworm's own package
# (2.42, promtool included) on the project's Debian root (docker/debian-root.sh), so no image
# registry is needed. Built by bundle/images/prometheus.py, tagged by a hash of its inputs.
# No `# syntax=` line: it would pull the Dockerfile frontend from a registry.
ARG BASE_IMAGE=sglang-bundle/debian-root:bookworm
FROM ${BASE_IMAGE}
ARG PROMETHEUS_VERSION
# --no-install-recommends: the server and promtool, not the node exporter or the web console libs.
# apt's downloads and lists live in BuildKit cache mounts, never in the image (as in base.Dockerfile).
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    rm -f /etc/apt/apt.conf.d/docker-clean \
 && echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' > /etc/apt/apt.conf.d/keep-downloads \
 && groupadd --system --gid 990 prometheus \
 && useradd --system --uid 990 --gid 990 --no-create-home --home-dir /var/lib/prometheus prometheus \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "prometheus=${PROMETHEUS_VERSION}" \
 && install -d -o prometheus -g prometheus /prometheus \
 && prometheus --version && promtool --version
# The `prometheus` user is made above with a fixed system id (Debian's package keeps an existing one), so
# USER can be numeric and the host resolves it (hadolint DL3066).
USER 990:990
EXPOSE 9090
ENTRYPOINT ["prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=:9090"]

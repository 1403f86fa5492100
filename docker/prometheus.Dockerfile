# Prometheus for the monitoring profile (compose/monitoring.yaml): Debian bookworm's own package
# (2.42, promtool included) on the project's Debian root (docker/debian-root.sh), so no image
# registry is needed. Built by bundle/images/prometheus.py, tagged by a hash of its inputs.
# No `# syntax=` line: it would pull the Dockerfile frontend from a registry.
ARG BASE_IMAGE=sglang-bundle/debian-root:bookworm
FROM ${BASE_IMAGE}
ARG PROMETHEUS_VERSION
# --no-install-recommends: the server and promtool, not the node exporter or the web console libs.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "prometheus=${PROMETHEUS_VERSION}" \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/apt/*.bin \
 && install -d -o prometheus -g prometheus /prometheus \
 && prometheus --version && promtool --version
USER prometheus
EXPOSE 9090
ENTRYPOINT ["prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=:9090"]

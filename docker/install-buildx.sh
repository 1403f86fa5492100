#!/usr/bin/env bash
# Install the docker buildx CLI plugin from Debian's archive (package docker-buildx) into
# ~/.docker/cli-plugins, for hosts whose Docker CLI has no buildx and no registry to fetch it from
# (this project's CI: a Docker 23+ CLI refuses BuildKit builds without buildx). The .deb is checked
# against the sha256 in the signed-by-Debian Packages index before it is unpacked.
#   docker/install-buildx.sh        (idempotent: does nothing when `docker buildx` works)
# Env: BUILDX_SUITE (default trixie), DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
if docker buildx version >/dev/null 2>&1; then
  docker buildx version
  exit 0
fi
suite=${BUILDX_SUITE:-trixie}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
work=$(mktemp -d /tmp/buildx.XXXXXX)
trap 'rm -rf "$work"' EXIT
curl -fsSL "$mirror/dists/$suite/main/binary-$arch/Packages.xz" -o "$work/Packages.xz"
# Decompressed to a file first: awk stops at the entry, and a pipe would fail xz with SIGPIPE.
xz -dc "$work/Packages.xz" > "$work/Packages"
entry=$(awk '/^Package: docker-buildx$/{p=1} p&&/^(Filename|SHA256):/{print $2} p&&/^$/{exit}' "$work/Packages")
file=$(echo "$entry" | sed -n 1p)
sum=$(echo "$entry" | sed -n 2p)
[ -n "$file" ] && [ -n "$sum" ] || { echo "docker-buildx not found in $suite" >&2; exit 4; }
curl -fsSL "$mirror/$file" -o "$work/buildx.deb"
echo "$sum  $work/buildx.deb" | sha256sum -c --quiet
dpkg-deb -x "$work/buildx.deb" "$work/root"
mkdir -p "$HOME/.docker/cli-plugins"
install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-buildx" "$HOME/.docker/cli-plugins/docker-buildx"
docker buildx version

#!/usr/bin/env bash
# Make a Debian root with debootstrap and import it as a local image, for hosts with no image
# registry (this project's CI). It stands in for the CUDA base wherever a stage needs no CUDA, and
# is the base of the rehearsal image.
#   docker/debian-root.sh [TAG]     (default sglang-bundle/debian-root:bookworm)
# Idempotent: an existing image with that tag is kept. Needs root, debootstrap and a Debian mirror.
set -euo pipefail
tag=${1:-sglang-bundle/debian-root:bookworm}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What every stage built on the stand-in needs: TLS roots, curl for healthchecks, Python with venv.
packages=ca-certificates,curl,python3,python3-venv

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag already exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 4; }
root=$(mktemp -d /tmp/debian-root.XXXXXX)
trap 'rm -rf "$root" "$root.log"' EXIT
# Its whole log goes to a file (the last lines are shown if it fails); a condensed copy is the
# progress of these minutes (docker/debootstrap-progress.awk).
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" 2>&1 \
  | tee "$root.log" | awk -f "$(dirname "$0")/debootstrap-progress.awk" \
  || { tail -20 "$root.log" >&2; exit 1; }
# Trust the same certificate authorities as this host (a TLS-intercepting proxy, if any).
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$tag" >/dev/null
echo "imported $tag ($suite from $mirror)"

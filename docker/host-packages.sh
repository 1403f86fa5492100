#!/usr/bin/env bash
# Debian packages the project's own install needs on the host (`make install` runs this):
#   debootstrap     makes the Debian roots the rehearsal image and the stand-in base are built on
#                   (no image registry is needed: docker/debian-root.sh, docker/standin-root.sh)
#   patchelf        lets the stand-in root carry a relocatable CPython 3.12 (docker/standin-root.sh)
#   docker-registry the distribution registry `bundle pull`'s tests serve images from on 127.0.0.1
#   promtool        checks the rendered Prometheus config and alert rules and runs their unit tests
#                   (Debian's `prometheus` package; its service is not started in a container)
#   chromium        the browser the documentation tests load every page in, headless, over the
#                   DevTools protocol (tests/test_docs_browser.py)
# As root it installs what is missing with apt-get; otherwise it names the one command to run.
# Idempotent: prints nothing and installs nothing when every command is there.
set -euo pipefail
declare -A provides=([debootstrap]=debootstrap [patchelf]=patchelf [docker-registry]=docker-registry
                    [promtool]=prometheus [chromium]=chromium)
missing=()
for cmd in "${!provides[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${provides[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "host packages missing: ${missing[*]}; install them with your package manager" >&2
  exit 4
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "host packages missing: ${missing[*]}. Run once, then \`make install\` again:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 4
fi
echo "installing host packages: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

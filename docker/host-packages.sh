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
# Another package manager may hold apt's locks (a fresh cloud VM runs unattended upgrades in its first
# minutes): it waits for them, saying so, up to APT_LOCK_TIMEOUT seconds (default 600) in all, then
# stops naming the lock. `apt-get install` waits by itself (DPkg::Lock::Timeout); `apt-get update` does
# not (apt 2.6 fails at once on the lists' lock), so it is retried until the same deadline.
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
timeout=${APT_LOCK_TIMEOUT:-600}
deadline=$((SECONDS + timeout))
said=
until err=$(apt-get update -qq 2>&1 >/dev/null); do
  if ! grep -q 'Could not get lock' <<<"$err"; then echo "$err" >&2; exit 1; fi
  if [ $SECONDS -ge $deadline ]; then
    echo "$err" >&2
    echo "gave up after ${timeout} s waiting for the package manager's lock (another apt-get or unattended-upgrades holds it); run \`make install\` again when it is done, or set APT_LOCK_TIMEOUT=<seconds>" >&2
    exit 1
  fi
  [ -n "$said" ] || { echo "waiting up to ${timeout} s for the package manager's lock: $(grep -m1 -o 'Could not get lock.*' <<<"$err")" >&2; said=1; }
  sleep 2
done
left=$((deadline - SECONDS)); [ $left -gt 0 ] || left=1
# -q, not -qq: apt-get then prints "Waiting for cache lock: ... held by process N" while it waits, each
# second; the filter says it once, with the time limit, and drops the rest of the install's chatter.
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout="$left" "${missing[@]}" \
    | awk -v left="$left" '/^Waiting for cache lock/ && !said { sub(/^Waiting for cache lock: /, "");
        print "waiting up to " left " s for the package manager'"'"'s lock: " $0 > "/dev/stderr"; fflush("/dev/stderr"); said = 1 }'; then
  echo "apt-get install ${missing[*]} failed (above); if it names a lock, another package manager held it for ${timeout} s: run \`make install\` again when it is done, or set APT_LOCK_TIMEOUT=<seconds>" >&2
  exit 1
fi

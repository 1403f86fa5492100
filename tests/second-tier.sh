#!/usr/bin/env bash
# `make test`'s second tier: the images it stands on, built in the background beside the tier (the
# pytest command line given as arguments).
#
# On a cold engine the images take about half an hour, and a third of the tier's modules start no
# container at all (the kernels compiled on CPU, the docs in a browser, the simulator and the real
# router as processes, the lock against the index). So, in one background job:
#   1. the rehearsal image and the chain below it (base, framework, pd), on every core; meanwhile the
#      tier runs the modules that start no container; every `docker` test waits for this build
#      (its status file, tests/conftest.py);
#   2. `bundle build --standin` (it reuses those and builds kernels, overlay, runtime: the real kernels
#      layer is nvcc's, about 15 minutes of both cores on a cold 2-core engine, 2026-12-06), its RUN
#      steps held to half the cores where the engine's BuildKit cgroup can be set so (root, cgroupfs):
#      one nvcc job on 2 cores, the other core the tier's; the modules standing on the whole chain (the
#      audit, the Dockerfile chain tests, the bench launcher's probe) go last and wait for it.
# The layer lines are shown as they come (`[chain] ...`), the whole log kept. A warm engine has every
# layer and the rehearsal image: nothing starts in the background, and the tier runs on WARM_TEST_WORKERS
# (the Makefile's: two, as TEST_WORKERS, on 2 cores) instead of TEST_WORKERS. Without an engine the tier runs as it is (its
# Docker tests skip, or fail under CI=true).
set -uo pipefail
cd "$(dirname "$0")/.."
export BIN=${BIN:-.venv/bin}  # the background job below reads it

if ! docker info >/dev/null 2>&1; then
  PYTEST_XDIST_AUTO_NUM_WORKERS=${TEST_WORKERS:-2} exec "$@"
fi

# A warm engine holds every layer and the rehearsal image: nothing builds beside the tier, so no test
# waits and the tier runs longest module first (not the container-free modules first, which only pays
# while a build runs). Every layer told as built by the plan, and the rehearsal image of this tree's tag.
if plan=$("$BIN/bundle" build --standin --dry-run 2>/dev/null) && grep -q '(built: will be reused)' <<<"$plan" \
    && ! grep -q '(to build)' <<<"$plan" \
    && tag=$("$BIN/python" -m bundle.rehearsal.shared.image tag 2>/dev/null) \
    && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "[chain] every image the tier stands on is built (the stand-in chain and $tag): nothing builds beside it;" \
    "the tier on ${WARM_TEST_WORKERS:-2} workers"
  PYTEST_XDIST_AUTO_NUM_WORKERS=${WARM_TEST_WORKERS:-2} exec "$@"
fi
# The tier's workers while the images build beside it (`-n auto` reads this).
export PYTEST_XDIST_AUTO_NUM_WORKERS=${TEST_WORKERS:-2}

work=$(mktemp -d "${TMPDIR:-/tmp}/bundle-chain.XXXXXX")
rehearsal_status=$work/rehearsal-status
status=$work/status
log=$work/build.log

# BuildKit (the engine's, cgroupfs driver) runs every RUN step in a cgroup under docker/buildkit. For the
# build's length that cgroup is held to half the cores (cpuset.cpus, where root can write it; put back
# when the build ends), which the kernels layer's `nproc` then reads as its parallel nvcc jobs: beside the
# tier one job at a time on one of 2 cores, the other core the tests'. Two of the fused MoE's cicc at
# once held 13 GB (8.1 + 4.9, 2026-12-06), and beside two workers' engine stacks that emptied this 24 GB
# machine. Not idle priority: the tier builds small images of its own (the release and pull tests', the
# derived images), which share that cgroup and would starve behind busy tests.
#
# On that core the build also comes first: its cgroup's CPU weight is 8 times a container's (cgroup v1
# cpu.shares 8192 against 1024, v2 cpu.weight 800 against 100). The kernels layer is the cold run's
# longest path (the audit and the chain's own tests wait for it), and beside the tier's engine
# containers on an equal weight it took 39 min instead of 26 (2026-12-06, a cold run of 3fbf686); the
# tier has the other core whole.
knobs=()
for dir in ${CHAIN_CGROUPS:-/sys/fs/cgroup/cpuset/docker/buildkit /sys/fs/cgroup/cpu/docker/buildkit /sys/fs/cgroup/docker/buildkit}; do
  [ -d "$dir" ] || mkdir "$dir" 2>/dev/null || continue
  if [ -w "$dir/cpuset.cpus" ]; then
    cores=$(nproc)
    half=$(( cores > 1 ? cores / 2 : 1 ))
    knobs+=("$dir/cpuset.cpus=$((cores - half))-$((cores - 1))")
  fi
  [ -w "$dir/cpu.shares" ] && knobs+=("$dir/cpu.shares=8192")
  [ -w "$dir/cpu.weight" ] && knobs+=("$dir/cpu.weight=800")
done

# In its own session (setsid), so that stopping it stops the Docker client and everything it started.
setsid bash -c '
  log=$1 rehearsal_status=$2 status=$3
  shift 3
  set_knobs() {  # FILE=VALUE...: each written, its old value kept in "restore" for put_back
    restore=()
    for knob in "$@"; do
      file=${knob%=*}
      old=$(cat "$file" 2>/dev/null) && echo "${knob##*=}" >"$file" 2>/dev/null && restore+=("$file=$old")
    done
  }
  put_back() { for knob in "${restore[@]}"; do echo "${knob##*=}" >"${knob%=*}" 2>/dev/null; done; }
  restore=()
  trap "put_back; exit 143" TERM  # stopped: the knobs go back all the same
  # Step 1 on every core. Its progress lines as they come (the tag it prints on stdout is not news).
  echo "[chain] building the rehearsal image (and the chain under it) beside the tests that start no container; log: $log"
  "$BIN/python" -m bundle.rehearsal.shared.image image 2>&1 >/dev/null | tee -a "$log" | sed -u "s/^/[chain] /"
  rc=${PIPESTATUS[0]}
  echo "$rc" >"$rehearsal_status"
  if [ "$rc" -ne 0 ]; then
    echo "[chain] the rehearsal image failed (exit $rc)"
    echo "$rc" >"$status"
    exit 0
  fi
  set_knobs "$@"
  if [ ${#restore[@]} -gt 0 ]; then
    echo "[chain] building the upper layers beside the tier, its RUN steps on half the cores, first on them (${restore[*]%%=*}); log: $log"
  else
    echo "[chain] building the upper layers beside the tier (sharing the CPU with it); log: $log"
  fi
  shown=$(wc -l <"$log")  # the lines of step 1 were shown as they came
  "$BIN/bundle" build --standin >>"$log" 2>&1
  rc=$?
  put_back
  # The layer lines (`[4/6] kernels built ... in 812 s`), not the steps: the tier goes on printing.
  # (A log is no terminal: the console wraps a long line, so " in 812 s" may stand on a line of its own.)
  tail -n "+$((shown + 1))" "$log" | awk "/^\\[[0-9]+\\/[0-9]+\\] /{if(l)print l; l=\$0; next} /^in [0-9]+ s\$/{if(l){print l \" \" \$0; l=\"\"}} END{if(l)print l}" \
    | sed "s/^/[chain] /"
  [ "$rc" -eq 0 ] || { echo "[chain] the build failed (exit $rc); its log ends:"; tail -n 40 "$log"; }
  echo "$rc" >"$status"
' chain-build "$log" "$rehearsal_status" "$status" "${knobs[@]}" &
builder=$!

# A heartbeat while the build runs: the layer being built, from its log, every 5 minutes.
(
  beats=0
  while [ ! -e "$status" ] && kill -0 "$builder" 2>/dev/null; do
    sleep 1
    beats=$((beats + 1))
    if [ $((beats % 300)) -eq 0 ]; then
      layer=$(grep -E '^\[[0-9]+/[0-9]+\] .* building ' "$log" | tail -n 1)
      echo "[chain] still building: ${layer:-starting}"
    fi
  done
) &
heartbeat=$!

BUNDLE_REHEARSAL_BUILD_STATUS=$rehearsal_status BUNDLE_CHAIN_BUILD_STATUS=$status BUNDLE_CHAIN_BUILD_LOG=$log "$@"
rc=$?

# A tier narrowed by PYTEST_ARGS to tests that never waited for the build: stop it rather than make
# the developer wait for a layer nothing asked for (`make image-standin` builds it).
stopped=""
if [ ! -e "$status" ]; then
  echo "[chain] no selected test needed the upper layers: stopping their build (\`make image-standin\` builds them)"
  stopped=1
  # Its whole session; retried while setsid has not yet made it a session (a tier that ends at once).
  for _ in $(seq 100); do
    kill -0 "$builder" 2>/dev/null || break
    kill -TERM -- "-$builder" 2>/dev/null && break
    sleep 0.1
  done
fi
wait "$builder" 2>/dev/null
wait "$heartbeat" 2>/dev/null  # it ends within a second of the build
if [ -z "$stopped" ] && [ "$(cat "$status" 2>/dev/null)" != "0" ] && [ "$rc" -eq 0 ]; then
  rc=1  # the build failed and no test said so: the run is still red
fi
exit "$rc"

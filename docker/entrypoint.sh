#!/bin/sh
# bundle-entrypoint: the entrypoint of every bundle container (real and rehearsal images alike).
# If the compose secret `api_key` holds a key, hand it to the server or router as --api-key at exec
# time, so the key lives only in the secret file and this process: never in the compose file,
# `docker inspect` (Config.Cmd / Config.Env) or the container's logs.
set -eu
# The TileLang kernels the kernels layer compiled for the lock's arch (docker/tilelang-prebuild.py)
# go into the JIT cache volume's TileLang folder, the only place TileLang looks before it compiles;
# entries already there stay (-n). A volume that cannot be written is the server's problem to report.
prebuilt=/opt/bundle/tilelang-cache
if [ -n "${TILELANG_CACHE_DIR:-}" ] && [ -d "$prebuilt" ]; then
  mkdir -p "$TILELANG_CACHE_DIR" 2>/dev/null && cp -Rn "$prebuilt/." "$TILELANG_CACHE_DIR/" 2>/dev/null \
    || echo "bundle-entrypoint: could not copy $prebuilt into $TILELANG_CACHE_DIR: TileLang compiles at first use" >&2
fi
key_file=/run/secrets/api_key
if [ -s "$key_file" ]; then
  key=$(tr -d '\r\n' < "$key_file")
  if [ -n "$key" ]; then
    exec "$@" --api-key "$key"
  fi
fi
exec "$@"

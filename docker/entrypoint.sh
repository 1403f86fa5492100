#!/bin/sh
# bundle-entrypoint: the entrypoint of every bundle container (real and rehearsal images alike).
# If the compose secret `api_key` holds a key, hand it to the server or router as --api-key at exec
# time, so the key lives only in the secret file and this process: never in the compose file,
# `docker inspect` (Config.Cmd / Config.Env) or the container's logs.
set -eu
key_file=/run/secrets/api_key
if [ -s "$key_file" ]; then
  key=$(tr -d '\r\n' < "$key_file")
  if [ -n "$key" ]; then
    exec "$@" --api-key "$key"
  fi
fi
exec "$@"

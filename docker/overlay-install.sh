#!/bin/sh
# Install the kernel overlay copied to $1: a Python project (pyproject.toml) is installed into the
# image's venv without dependencies (they must already be in the lock); anything else stays as files.
set -eu
dir=$1
version=$2
if [ -f "$dir/pyproject.toml" ]; then
  uv pip install --no-deps --no-build-isolation "$dir"
  echo "kernel overlay $version installed from $dir"
else
  echo "kernel overlay $version: no pyproject.toml in $dir, files kept as they are"
fi
echo "$version" > "$dir/VERSION"

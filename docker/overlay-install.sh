#!/bin/sh
# Install the kernel overlay copied to $1: a Python project (pyproject.toml) is installed into the
# image's venv without dependencies (they must already be in the lock); anything else stays as files.
set -eu
dir=$1
version=$2
if [ -f "$dir/pyproject.toml" ]; then
  uv pip install --no-deps --no-build-isolation "$dir"
  # A start-up hook shipped as a .pth must land in site-packages (an editable install would not
  # ship it, and the config switch would silently do nothing).
  for pth in "$dir"/*.pth; do
    [ -e "$pth" ] || continue
    purelib=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    test -f "$purelib/$(basename "$pth")" || { echo "overlay hook $(basename "$pth") missing in $purelib" >&2; exit 1; }
  done
  echo "kernel overlay $version installed from $dir"
else
  echo "kernel overlay $version: no pyproject.toml in $dir, files kept as they are"
fi
echo "$version" > "$dir/VERSION"

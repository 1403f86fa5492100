#!/usr/bin/env bash
# Make the stand-in for the CUDA base (nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04) on a host with
# no image registry: a Debian bookworm root made with debootstrap, carrying CPython 3.12 as
# /usr/local/bin/python3 (the framework closure in docker/requirements/framework.txt installs only
# on 3.12, and no Debian suite has a python3.12), imported as a local image.
#   docker/standin-root.sh [TAG]     (default sglang-bundle/standin-base:bookworm-py3.12)
# Idempotent: an existing image with that tag is kept. Needs root, debootstrap, patchelf, a Debian
# mirror and a CPython 3.12 built on bookworm (glibc 2.36) with --enable-shared, by default the
# pyenv build at /root/.pyenv/versions/3.12.1 (STANDIN_PYTHON=PREFIX picks another). Where a registry
# is reachable `bundle build --standin` does not need this script: it pulls the pinned
# python:3.12-slim-bookworm of docker/lock.toml [standin] (bundle/images/build.py ensure_standin_base).
#
# What differs from the GPU host's base, and why it does not change what the stand-in build tests
# (docs/images.md, "The stand-in base", says the same):
# - Debian 12 (glibc 2.36) instead of Ubuntu 24.04 (glibc 2.39): every wheel in the locks has a
#   manylinux tag <= 2.36 for CPython 3.12 (checked when the closure is installed), so the same
#   files with the same hashes are installed; only apt's package versions differ (no snapshot).
# - No CUDA toolkit, cuDNN or driver: nothing at build or audit time runs CUDA code; torch's wheels
#   bring their own CUDA runtime, cuBLAS, cuDNN and NCCL from PyPI. JIT compilers that need nvcc
#   (FlashInfer, DeepGEMM, tilelang) only run on a GPU host.
# - CPython 3.12.1 built by pyenv instead of Ubuntu's python3.12 (3.12.3): the same minor version
#   and ABI (cp312), which is all a wheel's tags select on.
# - Debian's python3 (3.11) is also installed by base.Dockerfile's apt step (python3-dev,
#   python3-venv); /usr/local/bin comes first on PATH, so python3 is 3.12 and /opt/venv is 3.12
#   (base.Dockerfile asserts it).
set -euo pipefail
tag=${1:-sglang-bundle/standin-base:bookworm-py3.12}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
pysrc=${STANDIN_PYTHON:-/root/.pyenv/versions/3.12.1}
# TLS roots and curl (healthchecks), a host compiler (Triton and TVM compile C at run time), and
# the shared libraries CPython's extension modules link against (ssl, ctypes, sqlite3, lzma, ...).
packages=ca-certificates,curl,build-essential,libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libncursesw6,libuuid1,libnsl2,libgdbm6,libexpat1

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag already exists"
  exit 0
fi
if [ ! -x "$pysrc/bin/python3.12" ]; then
  # No Debian suite has a python3.12 and PyPI carries no CPython build: the other ways out.
  echo "no CPython 3.12 at $pysrc to put in the stand-in root. Fix, one of:" >&2
  echo "  - where a registry is reachable, \`bundle build --standin\` pulls the pinned python:3.12-slim-bookworm" >&2
  echo "    (docker/lock.toml [standin]) instead of running this script;" >&2
  echo "  - build CPython 3.12 on Debian bookworm with --enable-shared (e.g. \`pyenv install 3.12.1\`) and" >&2
  echo "    run again with STANDIN_PYTHON=<its prefix>;" >&2
  echo "  - or set BUNDLE_STANDIN_BASE to a local image with CPython 3.12 under /usr/local." >&2
  exit 4
fi
for tool in debootstrap patchelf; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install $tool" >&2; exit 4; }
done
pyversion=$("$pysrc/bin/python3.12" -c 'import platform; print(platform.python_version())')

root=$(mktemp -d /tmp/standin-root.XXXXXX)
trap 'rm -rf "$root" "$root.log"' EXIT
# Its whole log goes to a file (the last lines are shown if it fails); a condensed copy is the
# progress of these minutes (docker/debootstrap-progress.awk).
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" 2>&1 \
  | tee "$root.log" | awk -f "$(dirname "$0")/debootstrap-progress.awk" \
  || { tail -20 "$root.log" >&2; exit 1; }

# CPython under /usr/local, as the python:3.12 images have it: the interpreter, libpython, the
# standard library and headers. Left out: its site-packages (whatever was pip-installed into the
# source tree; venvs get pip from ensurepip's bundled wheel), the test suite (Ubuntu ships it in a
# separate package), IDLE/tkinter (no Tk here).
dest=$root/usr/local
mkdir -p "$dest/bin" "$dest/lib" "$dest/include"
cp -a "$pysrc/include/python3.12" "$dest/include/"
cp -a "$pysrc"/lib/libpython3* "$dest/lib/"
cp -a "$pysrc/lib/pkgconfig" "$dest/lib/"
tar -C "$pysrc/lib" --exclude='python3.12/site-packages/*' --exclude='python3.12/test' \
    --exclude='python3.12/idlelib' --exclude='python3.12/tkinter' --exclude='__pycache__' \
    -cf - python3.12 | tar -C "$dest/lib" -xf -
cp -a "$pysrc/bin/python3.12" "$pysrc/bin/python3.12-config" "$dest/bin/"
ln -s python3.12 "$dest/bin/python3"
ln -s python3.12-config "$dest/bin/python3-config"
ln -s python3 "$dest/bin/python"
# The build prefix is written into sysconfig's data, the Makefile and pkg-config files: point
# them at /usr/local. The interpreter's RUNPATH (the old prefix) goes; libpython is found through
# ld.so's default /usr/local/lib.
grep -rlI -- "$pysrc" "$dest/lib/python3.12" "$dest/lib/pkgconfig" "$dest/bin/python3.12-config" \
  | xargs -r sed -i "s|$pysrc|/usr/local|g"
patchelf --remove-rpath "$dest/bin/python3.12"
for lib in "$dest"/lib/libpython3*.so*; do
  [ -L "$lib" ] || patchelf --remove-rpath "$lib"
done
chroot "$root" /sbin/ldconfig

# Trust the same certificate authorities as this host (a TLS-intercepting proxy, if any), also
# for the venvs' pip, which reads certifi's bundle unless told otherwise (uv is told by
# base.Dockerfile's UV_NATIVE_TLS=1).
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"
fi
# Proven before import: the modules the stack needs load, and a venv with pip can be made.
chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin /usr/local/bin/python3 -c "
import ssl, ctypes, sqlite3, lzma, bz2, zlib, uuid, venv, sysconfig, sys
assert sys.version_info[:2] == (3, 12), sys.version
inc = sysconfig.get_paths()['include']
assert inc == '/usr/local/include/python3.12', inc
assert sysconfig.get_config_var('INCLUDEPY') == inc
print('python', sys.version.split()[0], 'ok')"
chroot "$root" /usr/local/bin/python3 -m venv /tmp/venv-check
chroot "$root" /tmp/venv-check/bin/python -m pip --version >/dev/null
rm -rf "$root/tmp/venv-check" "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
src_digest=$(tar -C "$pysrc" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
               --exclude='site-packages/*' --exclude='__pycache__' -cf - bin/python3.12 lib include \
             | sha256sum | cut -c1-16)
tar -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "LABEL io.sglang-bundle.standin=cuda-base io.sglang-bundle.standin.suite=$suite io.sglang-bundle.standin.python=$pyversion io.sglang-bundle.standin.python-source=$pysrc io.sglang-bundle.standin.python-digest=$src_digest" \
  --change 'CMD ["/bin/bash"]' \
  - "$tag" >/dev/null
echo "imported $tag ($suite from $mirror, CPython $pyversion from $pysrc)"

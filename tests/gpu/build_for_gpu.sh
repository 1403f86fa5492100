#!/usr/bin/env bash
# Build here, on a machine without a GPU, FlashInfer modules for a lent GPU's arch through the kernels
# layer's own path (docker/kernels-build.py: FlashInfer's generators and build.ninja, the base layer's
# nvcc and libcuda stub), and pack what tests/gpu/prebuilt_on_gpu.py needs on the GPU host:
#
#   tests/gpu/build_for_gpu.sh FRAMEWORK_IMAGE OUT [ARCH]     (ARCH default 9.0a: H100/H200)
#
# OUT/site: flashinfer's Python files (no sources, headers or CUTLASS: JIT is off there) with the
# modules in flashinfer/data/aot/, and apache-tvm-ffi; OUT/sm120/norm.so: norm built the same way
# for the lock's 12.0a (what the GPU image holds); OUT/built*.json: the builds' manifests.
set -euo pipefail
framework=${1:?framework image}; out=${2:?output folder}; arch=${3:-9.0a}
rm -rf "$out" && mkdir -p "$out/sm120"
out=$(realpath "$out")
docker run --rm --user 0 --entrypoint bash \
  -v "$PWD/docker/kernels-build.py:/opt/bundle/kernels-build.py:ro" -v "$PWD/tests/gpu:/gpu:ro" -v "$out:/out" \
  -e FLASHINFER_CUDA_ARCH_LIST="$arch" -e PYTHONPATH=/gpu "$framework" -c '
set -euo pipefail
FLASHINFER_CUDA_ARCH_LIST=12.0a FLASHINFER_WORKSPACE_BASE=/tmp/ws MAX_JOBS=$(nproc) python /opt/bundle/kernels-build.py \
  norm=flashinfer.jit.norm:gen_norm_module
cp /opt/bundle/kernels.json /out/built-sm120.json
cp "$(python -c "import flashinfer, os; print(os.path.dirname(flashinfer.__file__))")/data/aot/norm/norm.so" /out/sm120/
FLASHINFER_WORKSPACE_BASE=/tmp/ws MAX_JOBS=$(nproc) python /opt/bundle/kernels-build.py \
  norm=flashinfer.jit.norm:gen_norm_module sampling=flashinfer.jit.sampling:gen_sampling_module \
  silu_and_mul=gpu_generators:silu_and_mul
cp /opt/bundle/kernels.json /out/built.json
site=$(python -c "import flashinfer, os; print(os.path.dirname(os.path.dirname(flashinfer.__file__)))")
mkdir -p /out/site
tar -C "$site" --exclude="flashinfer/data/csrc" --exclude="flashinfer/data/cutlass" --exclude="flashinfer/data/cccl" \
    --exclude="flashinfer/data/include" --exclude="flashinfer/data/spdlog" --exclude="__pycache__" \
    -cf - flashinfer tvm_ffi requests urllib3 idna certifi pynvml.py tqdm | tar -C /out/site -xf -
chown -R '"$(id -u):$(id -g)"' /out'
du -sh "$out"/site "$out"/sm120

#!/usr/bin/env bash
# Make /usr/local/cuda from the CUDA toolkit wheels of docker/lock.toml [cuda] installed in /opt/venv
# (nvidia/cu13), laid out as the JIT compilers expect it: FlashInfer's build.ninja links with
# -L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs -lcudart -lcuda, nvcc.profile finds cicc in
# $TOP/nvvm/bin, torch.utils.cpp_extension and tilelang read $CUDA_HOME/bin/nvcc and include/.
# The wheels are linked, not copied (one toolchain, one copy); lib64 adds what the wheels lack:
# unversioned libcudart.so/libnvrtc.so/libnvJitLink.so for -l, and the driver's link stub.
# Also proven here: nvcc compiles and links an sm_120a kernel calling the driver API.
set -euo pipefail
cu=$(/opt/venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
home=/usr/local/cuda
test -x "$cu/bin/nvcc" || { echo "no nvcc in $cu: the base layer's CUDA wheels are missing" >&2; exit 1; }
mkdir -p "$home/lib64/stubs"
for part in bin include nvvm lib; do ln -sfn "$cu/$part" "$home/$part"; done
# Every library file of the wheels (nvcc links libcudart_static.a and libcudadevrt.a by default).
for lib in "$cu"/lib/*; do [ -f "$lib" ] && ln -sfn "$lib" "$home/lib64/$(basename "$lib")"; done
for name in cudart nvrtc nvJitLink; do
  versioned=$(cd "$cu/lib" && ls "lib$name.so."* | sort | head -1)
  ln -sfn "$cu/lib/$versioned" "$home/lib64/lib$name.so"
done
# The driver's link stub (docker/cuda-stub.py says why it must export the entry points), with the
# driver's soname, so what links against it needs libcuda.so.1: the library the host provides.
src=$(mktemp --suffix=.c)
count=$(python3 /opt/bundle/cuda-stub.py "$cu/include/cuda.h" "$src")
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib64/stubs/libcuda.so" "$src"
rm -f "$src"
echo "libcuda.so stub: $count driver entry points from $cu/include/cuda.h"

# Proven here, under --as-needed (Ubuntu's default, an option anywhere): a driver call links to
# libcuda.so.1, and nvcc is the lock's.
probe=$(mktemp -d)
printf '#include <cuda.h>\nint probe(void) { return cuInit(0) == CUDA_SUCCESS; }\n' > "$probe/probe.c"
cc -shared -fPIC -I"$home/include" -Wl,--as-needed -o "$probe/probe.so" "$probe/probe.c" \
   -L"$home/lib64/stubs" -lcuda
readelf -d "$probe/probe.so" | grep -q 'NEEDED.*\[libcuda\.so\.1\]' \
  || { echo "a driver call linked against the stub does not need libcuda.so.1" >&2; exit 1; }
printf '#include <cuda.h>\n__global__ void k(int *p) { *p = 1; }\nint probe(void) { CUdevice d; return cuDeviceGet(&d, 0); }\n' > "$probe/k.cu"
"$home/bin/nvcc" -shared -Xcompiler -fPIC -gencode arch=compute_120a,code=sm_120a -o "$probe/k.so" "$probe/k.cu" \
  -L"$home/lib64/stubs" -L"$home/lib64" -lcudart -lcuda -Xlinker --as-needed
readelf -d "$probe/k.so" | grep -q 'NEEDED.*\[libcuda\.so\.1\]' \
  || { echo "an nvcc-built module calling the driver API does not need libcuda.so.1" >&2; exit 1; }
rm -rf "$probe"
"$home/bin/nvcc" --version | tail -2

# docker buildx bake -f docker/docker-bake.hcl [runtime]   (from the project root)
# The same six layers as `bundle build` (the primary path, `make image`), for hosts with a current
# buildx/BuildKit: each layer's FROM is the layer below it through a `target:` context, so one bake
# builds the chain. The defaults below are docker/lock.toml's pins; tests/test_dockerfiles.py fails
# when they drift. Tags here are simple (<repo>:<layer>-bake); `bundle build` adds content keys,
# the lock-hash tag and labels. Needs the Dockerfile frontend 1.4+ for named contexts: not the
# built-in one of Docker Engine 20.10 (use `bundle build` there).

variable "REPO" { default = "ghcr.io/sglang-bundle/sglang-sm120" }
variable "BASE_IMAGE" { default = "sglang-bundle/standin-base:bookworm-py3.12" }
variable "APT_SNAPSHOT" { default = "" }
variable "PYTHON_VERSION" { default = "3.12" }
variable "CUDA_VERSION" { default = "13.0" }
variable "TORCH_CUDA_ARCH_LIST" { default = "12.0a" }
variable "SGLANG_SOURCE" { default = "pypi" }
variable "SGLANG_GIT_REPO" { default = "https://github.com/sgl-project/sglang.git" }
variable "SGLANG_GIT_COMMIT" { default = "" }
variable "OVERLAY_VERSION" { default = "0.0.0" }
variable "KERNELS" { default = "norm=flashinfer.jit.norm:gen_norm_module" }
variable "LOCK_HASH" { default = "unknown" }
variable "REVISION" { default = "" }

group "default" { targets = ["runtime"] }
group "validate" { targets = ["base", "framework", "pd", "kernels", "overlay", "runtime"] }

target "_common" {
  context = "."
  labels = {
    "org.opencontainers.image.source"   = "sglang-sm120-bundle"
    "org.opencontainers.image.revision" = REVISION
    "org.opencontainers.image.title"    = "SGLang for sm_120 (RTX PRO 6000 Blackwell)"
  }
}

target "base" {
  inherits   = ["_common"]
  dockerfile = "docker/base.Dockerfile"
  args = {
    BASE_IMAGE           = BASE_IMAGE
    APT_SNAPSHOT         = APT_SNAPSHOT
    PYTHON_VERSION       = PYTHON_VERSION
    CUDA_VERSION         = CUDA_VERSION
    TORCH_CUDA_ARCH_LIST = TORCH_CUDA_ARCH_LIST
  }
  tags = ["${REPO}:base-bake"]
}

target "framework" {
  inherits   = ["_common"]
  dockerfile = "docker/framework.Dockerfile"
  contexts   = { parent = "target:base" }
  args = {
    PARENT_IMAGE      = "parent"
    SGLANG_SOURCE     = SGLANG_SOURCE
    SGLANG_GIT_REPO   = SGLANG_GIT_REPO
    SGLANG_GIT_COMMIT = SGLANG_GIT_COMMIT
  }
  tags = ["${REPO}:framework-bake"]
}

target "pd" {
  inherits   = ["_common"]
  dockerfile = "docker/pd.Dockerfile"
  contexts   = { parent = "target:framework" }
  args       = { PARENT_IMAGE = "parent" }
  tags       = ["${REPO}:pd-bake"]
}

# KERNELS: `bundle build --dry-run` prints the list (bundle/images/kernels_jit.py); the default here is
# CI's one small module.
target "kernels" {
  inherits   = ["_common"]
  dockerfile = "docker/kernels.Dockerfile"
  contexts   = { parent = "target:pd" }
  args       = { PARENT_IMAGE = "parent", KERNELS = KERNELS }
  tags       = ["${REPO}:kernels-bake"]
}

target "overlay" {
  inherits   = ["_common"]
  dockerfile = "docker/overlay.Dockerfile"
  contexts   = { parent = "target:kernels" }
  args       = { PARENT_IMAGE = "parent", OVERLAY_VERSION = OVERLAY_VERSION }
  tags       = ["${REPO}:overlay-bake"]
}

target "runtime" {
  inherits   = ["_common"]
  dockerfile = "docker/runtime.Dockerfile"
  contexts   = { parent = "target:overlay" }
  args       = { PARENT_IMAGE = "parent", LOCK_HASH = LOCK_HASH }
  labels     = { "io.sglang-bundle.lock-hash" = LOCK_HASH }
  tags       = ["${REPO}:runtime-bake"]
}

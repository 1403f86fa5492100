# Layer 4 of 5, overlay: the project's own sm_120 kernels (kernels/, see docs/images.md). An empty
# or absent kernels/ gives an empty overlay. It sits above SGLang so a kernel change rebuilds only
# this layer and the runtime layer.
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120:pd
FROM ${PARENT_IMAGE}

ARG OVERLAY_VERSION=0.0.0
# The install script is listed first so the COPY has a source even when kernels/ is absent (the
# legacy builder refuses a COPY whose sources all match nothing); kernels/'s files land beside it.
COPY docker/overlay-install.sh kernel[s] /opt/bundle/kernels/
RUN --mount=type=cache,target=/root/.cache/uv,sharing=locked \
    UV_NO_CACHE=0 UV_LINK_MODE=copy sh /opt/bundle/kernels/overlay-install.sh /opt/bundle/kernels "${OVERLAY_VERSION}"

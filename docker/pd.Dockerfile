# Layer 3 of 5, pd: what prefill/decode disaggregation adds: NIXL for the KV transfer and smg (Shepherd
# Model Gateway), the router. NIXL is the `nixl` meta package (the module SGLang imports), which picks
# nixl-cu13 (with the UCX it bundles) from torch's CUDA major and brings nixl-cu12 beside it. Their
# dependencies are already in the framework layer (resolved together by `make lock`), so only these
# wheels are installed, hashes required. sglang-router must never be installed next to smg (both ship
# an `smg` console script): the check below fails the build if it is there.
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120:framework
FROM ${PARENT_IMAGE}

# One step, so one layer: on a fuse-overlayfs engine (this project's CI) every layer's export walks
# the whole tree below it, 8-9 s a layer above the framework (2026-12-04). The file comes in
# through a bind mount of the context and is installed in the same step (the legacy builder gets a
# COPY instead: bundle/images/legacy.py).
RUN --mount=type=cache,target=/root/.cache/uv,sharing=locked \
    --mount=type=bind,source=docker/requirements/pd.txt,target=/tmp/bundle-context/pd.txt \
    install -D -m 0644 /tmp/bundle-context/pd.txt /opt/bundle/requirements/pd.txt \
 && UV_NO_CACHE=0 UV_LINK_MODE=copy uv pip install --require-hashes --no-deps -r /opt/bundle/requirements/pd.txt \
 && python -c "import importlib.metadata as m, importlib.util as u, smg.router_args, smg.launch_router, nixl; assert u.find_spec('sglang_router') is None, 'sglang-router is installed next to smg'; print('nixl', m.version('nixl'), 'nixl-cu13', m.version('nixl-cu13'), 'smg', m.version('smg'))"

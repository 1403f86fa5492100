# Layer 3 of 5, pd: what prefill/decode disaggregation adds: NIXL (nixl-cu13, with the UCX it
# bundles) for the KV transfer, and sglang-router. Their dependencies are already in the framework
# layer (resolved together by `make lock`), so only these two wheels are installed, hashes required.
ARG PARENT_IMAGE=sglang-bundle/sglang-sm120:framework
FROM ${PARENT_IMAGE}

COPY docker/requirements/pd.txt /opt/bundle/requirements/pd.txt
RUN uv pip install --require-hashes --no-deps -r /opt/bundle/requirements/pd.txt \
 && python -c "import importlib.metadata as m; print('nixl-cu13', m.version('nixl-cu13'), 'sglang-router', m.version('sglang-router'))"

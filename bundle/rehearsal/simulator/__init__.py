"""The worker simulator: a stand-in for `python3 -m sglang.launch_server` in the rehearsal.

It takes the same command line as SGLang's server (parsed by SGLang's own parser when it imports),
speaks the HTTP API that the router (smg 1.13.0), bench_serving and the bundle driver use, and holds no
model: answers come from rules (answers.py), token counts from the simulated model folder's
tokenizer, timing from knobs (knobs.py). In PD mode the prefill role serves a bootstrap port and the
decode role fetches each request's "KV cache" from it, so a request only completes when it really
passed through both, as with NIXL on a GPU host. Start: `python -m bundle.rehearsal.simulator -- ARGS...`.
"""

"""SGLang's own semantic checks: every rendered server command line of every topology through
ServerArgs construction and resolution (the post-init checks), with the model's config.json and the
platform reported as sm_120; what it resolves is the prediction of what the server will pick."""

from __future__ import annotations

from bundle.images.audit.context import AuditContext
from bundle.findings import Finding, Level

# What `bundle audit` shows as predicted, per server (and compares with the attestation after launch).
PREDICTED = ("attention_backend", "page_size", "moe_runner_backend", "sm120_sparse_mla_backend",
             "kv_cache_dtype", "speculative_algorithm", "speculative_num_steps",
             "speculative_num_draft_tokens", "disaggregation_mode", "tp_size", "disable_cuda_graph",
             "speculative_eagle_topk", "speculative_dspark_block_size", "speculative_draft_model_path")


def _serverargs(ctx: AuditContext) -> dict:
    facts = ctx.facts.get("serverargs")
    if not isinstance(facts, dict) or "probe_error" in facts:
        raise RuntimeError(f"the probe could not run ServerArgs: {(facts or {}).get('probe_error', 'no facts')}")
    return facts


def predicted(ctx: AuditContext) -> dict:
    """server name -> the choices SGLang resolved for it (only the servers that resolved)."""
    facts = ctx.facts.get("serverargs") or {}
    return {name: {k: got["resolved"].get(k) for k in PREDICTED}
            for name, got in sorted(facts.items()) if isinstance(got, dict) and got.get("ok")}


def server_args(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = _serverargs(ctx)
    findings = []
    for cmd in ctx.commands:
        got = facts.get(cmd.name)
        if got is None:
            findings.append(Finding(Level.FAIL, f"{cmd.name}: not resolved by the probe", fix="see --debug"))
        elif not got["ok"]:
            findings.append(Finding(Level.FAIL, f"{cmd.name}: SGLang's ServerArgs rejects the command line: "
                                                 f"{got['error']}",
                                    fix=f"{ctx.config_name}: fix {cmd.key_path}.extra_args or the levers so SGLang "
                                        f"accepts it"))
    resolved = sum(1 for c in ctx.commands if (facts.get(c.name) or {}).get("ok"))
    return (f"{resolved} of {len(ctx.commands)} server command lines resolved by SGLang's ServerArgs "
            f"(model config: {ctx.model_source})"), findings


def _speculative(p: dict) -> str:
    """The speculative choice as SGLang resolved it; DSpark's block size is the verify window less one."""
    algorithm = p.get("speculative_algorithm")
    if not algorithm:
        return "none"
    window = p.get("speculative_num_draft_tokens")
    if str(algorithm).upper() == "DSPARK":
        block = p.get("speculative_dspark_block_size") or (window - 1 if isinstance(window, int) else None)
        return (f"DSPARK (block size {block}, verify window {window}, draft from "
                f"{p.get('speculative_draft_model_path')})")
    return (f"{algorithm} (steps {p.get('speculative_num_steps')}, top-k {p.get('speculative_eagle_topk')}, "
            f"draft tokens {window})")


def choices(ctx: AuditContext) -> tuple[str, list[Finding]]:
    """The predicted choices, one INFO line per server; a WARN on the paths known to be slow."""
    pred = predicted(ctx)
    findings = []
    for name, p in pred.items():
        findings.append(Finding(Level.INFO, f"{name}: attention {p['attention_backend']}, page {p['page_size']}, "
                                             f"MoE {p['moe_runner_backend']}, sparse-MLA "
                                             f"{p['sm120_sparse_mla_backend']}, KV {p['kv_cache_dtype']}, "
                                             f"speculative {_speculative(p)}"))
        if p["sm120_sparse_mla_backend"] == "torch":
            findings.append(Finding(Level.WARN, f"{name}: sparse-MLA decode takes SGLang's torch path (slowest)",
                                    fix="levers.sparse_mla: flashinfer (SGLang's default) or bundle"))
        if p["disable_cuda_graph"]:
            findings.append(Finding(Level.WARN, f"{name}: CUDA graphs are off (about 10x slower decode)",
                                    fix="levers.cuda_graphs: true"))
    return f"predicted for {len(pred)} server(s)", findings

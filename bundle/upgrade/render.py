"""The upgrade report (and the --check answer) as plain text: one section per question, every item on
its own line, so two reports diff line by line and a CI log shows it whole."""

from __future__ import annotations


def _gb(size: int | None) -> str:
    return f"{size / 1e6:.0f} MB" if size is not None else "-"


def _code(lib: dict | None) -> str:
    if lib is None:
        return "absent"
    return ("runs" if lib["runs_on_sm120"] else "cannot run") + \
        f" ({lib['how'] or 'cubins ' + (', '.join(lib['cubins']) or 'none') + '; PTX ' + (', '.join(lib['ptx']) or 'none')})"


def text(report: dict) -> str:
    out = []
    old, new = report["old"], report["new"]
    out.append(f"bundle upgrade {report['change']}: sglang {old['sglang']} (lock {old['lock_hash']}) -> "
               f"sglang {new['sglang']} (lock {new['lock_hash']})")
    out.append(f"  old lock {old['lock']}" + (f", image {old['image']}" if old.get("image") else ""))
    out.append(f"  new lock {new['lock']}" + (f", image {new['image']}" if new.get("image") else ""))

    pk = report["packages"]
    out.append("")
    out.append(f"PACKAGES ({pk['count']['old']} -> {pk['count']['new']}; changed {len(pk['changed'])}, "
               f"added {len(pk['added'])}, removed {len(pk['removed'])})")
    for name, v in pk["lock_pins"].items():
        out.append(f"  lock pin    {name}: {v['old']} -> {v['new']}")
    for p in pk["changed"]:
        out.append(f"  changed     {p['name']} {p['old']} -> {p['new']} ({p['layer']}"
                   f"{', pinned by sglang' if p['pinned_by_sglang'] else ''})")
    for p in pk["added"]:
        out.append(f"  added       {p['name']} {p['new']} ({p['layer']}{', pinned by sglang' if p['pinned_by_sglang'] else ''})")
    for p in pk["removed"]:
        out.append(f"  removed     {p['name']} {p['old']} ({p['layer']})")
    for name, version in pk["overrides"].items():
        out.append(f"  override    {name}=={version}")

    cl = report["command_line"]
    out.append("")
    out.append("COMMAND-LINE CONTRACT")
    for name, p in cl["parsers"].items():
        out.append(f"  {name} {p['old_version']} -> {p['new_version']}: {p['options']['old']} -> "
                   f"{p['options']['new']} options; {len(p['diff'])} difference(s)" + ("" if p["diff"] else ": none"))
        for d in p["diff"]:
            out.append(f"    {d['kind']:<8} {d['what']}")
    out.append(f"  on the bundle's command lines and extra_args: "
               f"{len(cl['breaks'])} break(s), {len(cl['attention'])} to look at")

    out.append("")
    out.append("PREDICTED ON sm_120 (SGLang's own post-init on every rendered command line)")
    if report["predicted"] is None:
        out.append("  not compared (--no-build)")
    else:
        for topo, t in report["predicted"].items():
            if not t["differences"]:
                out.append(f"  {topo}: none differ ({len(t['servers'])} server(s))")
            for server, diff in t["differences"].items():
                for key, v in diff.items():
                    out.append(f"  {topo}: {server} {key}: {v['old']} -> {v['new']}")
            for server, p in t["new"].items():
                if p:
                    out.append(f"    {server} now: attention {p.get('attention_backend')}, MoE {p.get('moe_runner_backend')}, "
                               f"sparse-MLA {p.get('sm120_sparse_mla_backend')}, KV {p.get('kv_cache_dtype')}, "
                               f"page {p.get('page_size')}, speculative {p.get('speculative_algorithm') or 'none'}"
                               + (f" (steps {p.get('speculative_num_steps')}, draft tokens "
                                  f"{p.get('speculative_num_draft_tokens')})" if p.get("speculative_algorithm") else ""))

    out.append("")
    out.append("sm_120 CODE PER NATIVE LIBRARY (cuobjdump)")
    if report["libraries"] is None:
        out.append("  not compared (--no-build)")
    else:
        libs = report["libraries"]
        moved = [lib for lib in libs if lib["change"] != "same"]
        out.append(f"  {len(libs)} libraries; {sum(1 for x in libs if x['change'] == 'lost')} lost sm_120 code, "
                   f"{sum(1 for x in libs if x['change'] == 'gained')} gained it, "
                   f"{sum(1 for x in libs if x['change'] == 'new')} new, {sum(1 for x in libs if x['change'] == 'gone')} gone")
        for lib in moved:
            out.append(f"  {lib['change']:<6} {lib['path']}: {_code(lib['old'])} -> {_code(lib['new'])}")
        for lib in libs:
            if lib["path"].startswith("sgl_kernel/") and lib["change"] == "same":
                out.append(f"  same   {lib['path']} ({_gb((lib['new'] or {}).get('size'))}): {_code(lib['new'])}")

    out.append("")
    out.append("GUARDS")
    for g in report["guards"]:
        out.append(f"  {'holds' if g['holds'] else 'BROKEN'}  {g['guard']}: {g['what']} ({g['where']})")

    v = report["verdict"]
    out.append("")
    out.append(f"VERDICT: {v['status'].upper()}")
    for b in v["breaks"]:
        out.append(f"  breaks: {b['where']}: {b['what']}")
    for a in v["attention"]:
        out.append(f"  attention: {a['what']}" + (f" [{a['where']}]" if a.get("where") else ""))
    if report.get("applied"):
        out.append("")
        out.append(f"APPLIED (lock hash now {report['applied']['lock_hash']}):")
        out += [f"  wrote {p}" for p in report["applied"]["written"]]
    out.append("")
    out.append("NEXT, ON THE GPU HOST" if report.get("applied") else "NEXT (after --apply), ON THE GPU HOST")
    out += [f"  {step}" for step in report["next"]]
    return "\n".join(out)


def check_text(result: dict) -> str:
    out = [f"bundle upgrade --check: lock {result['lock']} (sglang {result['sglang']}), index {result['index']}"]
    for row in result["packages"]:
        newer = ", ".join(row["newer"]) or "none"
        out.append(f"  {row['name']:<18} {row['pinned']:<10} newer: {newer}")
        out.append(f"  {'':<18} {'':<10} {row['answer']}")
    return "\n".join(out)

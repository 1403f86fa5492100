"""Every guard with what it refuses, why, and its upstream issue, from bundle.rules.guards.GUARDS
(the registry the rules' messages cite)."""

from __future__ import annotations

from docsgen.markdown import code, page, prose, table

ISSUE_URLS = {  # how an issue cited as "project #N" is reached
    "sglang": "https://github.com/sgl-project/sglang/issues/{n}",
    "flashinfer": "https://github.com/flashinfer-ai/flashinfer/issues/{n}",
    "vLLM": "https://github.com/vllm-project/vllm/issues/{n}",
    "NVIDIA/nccl": "https://github.com/NVIDIA/nccl/issues/{n}",
}


def issue_link(cited: str) -> str:
    project, _, number = cited.partition(" #")
    url = ISSUE_URLS.get(project)
    return f"[{prose(cited)}]({url.format(n=number)})" if url and number.isdigit() else prose(cited)


def reference(guards=None) -> str:
    if guards is None:
        from bundle.rules.guards import GUARDS as guards
    rows = [[prose(g.name), prose(g.refuses), prose(g.reason),
             ", ".join(issue_link(i) for i in g.upstream) or "the pinned source", code(g.where)] for g in guards]
    return page("Guards", "`bundle/rules/guards.py`",
                "Refusals for failures reported on this stack. Each is an error of `bundle validate` and "
                "`bundle launch` (exit 3) naming the file, the key path and the fix, before anything starts.", "",
                table(["guard", "refuses", "why", "upstream", "rule"], rows))

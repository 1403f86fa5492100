"""Inline code that a browser never breaks at a hyphen: `bundle build --standin` wrapped as
"bundle build -" / "-standin" (a line may end after any hyphen), which reads as two flags or none.
Each run of a code span's text that holds a hyphen (a flag, `sglang-sm120`, `rehearsal-engine-pd.yaml`)
is put in a nowrap span (a path's, between its slashes); the span's other break points (spaces, the <wbr> after a dot or slash that
docsgen/markdown.py adds) stay, so a long path still wraps in a narrow column. Code blocks (<pre>)
scroll instead and are left alone."""

from __future__ import annotations

import html
import re

_PRE = re.compile(r"<pre\b.*?</pre>", re.S)
_INLINE_CODE = re.compile(r"(<code\b[^>]*>)(.*?)(</code>)", re.S)
# Text between tags; a hyphenated run of it: no space, no tag.
_TEXT = re.compile(r">([^<]*)<")
_HYPHENATED = re.compile(r"[^\s<>]*-[^\s<>]*")


# A hyphenated word this long or shorter is never split; a longer one (a flag such as
# --disaggregation-decode-retraction-backup in a table's narrow column) may break at a hyphen inside it,
# but never in its leading dashes or right after them.
WHOLE = 24
_LEAD = re.compile(r"^-*[^-]*")


def _nowrap(text: str) -> str:
    return f'<span class="nobreak">{text}</span>'


def _keep(run: str) -> str:
    """A hyphenated run kept whole between its slashes, with a break allowed after each slash (a path
    such as `runs/<project>/<time>-launch/attestation.json` must still fit a phone)."""
    out = []
    for piece in run.split("/"):
        if "-" not in piece:
            out.append(piece)
        elif len(html.unescape(piece)) <= WHOLE:
            out.append(_nowrap(piece))
        else:
            lead = _LEAD.match(piece).group(0)
            out.append(_nowrap(lead) + piece[len(lead):])
    return "/<wbr>".join(out)


def _wrap_text(text: str) -> str:
    return _HYPHENATED.sub(lambda m: _keep(m.group(0)), text)


def _code(match: re.Match) -> str:
    opening, inner, closing = match.groups()
    if 'class="flag"' in inner or 'class="part"' in inner:  # the CLI reference keeps these whole already
        return match.group(0)
    wrapped = _TEXT.sub(lambda m: ">" + _wrap_text(m.group(1)) + "<", ">" + inner + "<")[1:-1]
    return opening + wrapped + closing


def keep_hyphens(html: str) -> str:
    """`html` with every inline code span's hyphenated runs unbreakable; code blocks untouched."""
    out, last = [], 0
    for block in _PRE.finditer(html):
        out.append(_INLINE_CODE.sub(_code, html[last:block.start()]))
        out.append(block.group(0))
        last = block.end()
    out.append(_INLINE_CODE.sub(_code, html[last:]))
    return "".join(out)

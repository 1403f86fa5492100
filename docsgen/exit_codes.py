"""The exit codes, from bundle.errors.EXIT_CODES (the codes the CLI returns)."""

from __future__ import annotations

from docsgen.markdown import code, page, prose, table


def reference() -> str:
    from bundle.errors import EXIT_CODES

    return page("Exit codes", "`bundle.errors.EXIT_CODES`",
                "Every user-facing error is one message naming the file, the key path and a `fix:` line, "
                "with one of these codes; `--debug` adds the traceback.", "",
                table(["code", "meaning"], [[code(c), prose(m)] for c, m in EXIT_CODES]))

"""The documentation site: its reference pages are generated from the code (the CLI's parser, the schema
and defaults, the exit codes, the guards' registry, the monitoring code, the lock), so a key planted in
the schema or a flag planted in a verb shows up in the built site without anyone writing a page; the
README stays a front door."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from bundle.cli import build_parser, verb_names
from bundle.errors import EXIT_CODES
from bundle.rules.guards import GUARDS
from docsgen import cli, config, exit_codes, guards, monitoring
from docsgen.markdown import code
from bundle.config import loader
from docsgen.pages import PAGES
from tests.conftest import require_tool
from tests.docs_site_build import build_site, copy_checkout

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = loader.schema()  # the core's and every wing's section, as the loader assembles them
DEFAULTS = loader.defaults_data()


def heading(path: str) -> str:
    """A key as its entry's heading shows it: whole, a line may end only after a dot."""
    return path.replace("<", "&lt;").replace(">", "&gt;").replace(".", ".<wbr>")


def test_the_cli_page_lists_every_verb_and_every_flag_of_the_parser():
    page = cli.reference()
    parser = build_parser()
    for name in verb_names():
        verb = name.replace("_", "-")
        assert f"## `bundle {verb}`" in page
    flags = {flag for action in parser._subparsers._group_actions[0].choices.values()
             for a in action._actions for flag in a.option_strings if flag not in ("-h", "--help")}
    assert len(flags) > 60
    missing = [flag for flag in sorted(flags) if f'<span class="flag">{flag}</span>' not in page]
    assert missing == []
    # `bundle` itself: its synopsis and the flags before the verb, --version among them.
    top = page[page.index("## `bundle`\n"):page.index("## `bundle audit`")]
    synopsis = re.sub(r"<[^>]+>", "", re.search(r'<p class="synopsis">(.*?)</p>', top).group(1))
    assert synopsis == "bundle [-h] [--version] [--debug] VERB ..."
    assert '<span class="flag">--version</span>' in top and '<span class="flag">--debug</span>' in top


def test_repeatable_is_never_read_as_one_of_the_choices():
    """"one of `a`, `b`, repeatable" reads as a third value: what a flag takes names its choices, then,
    after a semicolon, how often it may be given."""
    parser = build_parser()
    page = cli.reference(parser)
    assert ", repeatable" not in page
    assert "; the flag may be given again for each" in page


def test_a_planted_flag_appears_on_the_cli_page():
    parser = build_parser()
    down = parser._subparsers._group_actions[0].choices["down"]
    down.add_argument("--planted-flag", metavar="N", help="a flag planted by the test")
    page = cli.reference(parser)
    section = page[page.index("## `bundle down`"):]
    assert '<code><span class="flag">--planted-flag</span> N</code>' in section and "a flag planted by the test" in section


def test_the_configuration_page_lists_every_schema_key_with_its_default():
    page = config.reference()
    keys = [path for path, _node, _default in config.rows(SCHEMA, DEFAULTS)]
    assert len(keys) > 80 and "levers.speculative" in keys and "pd.prefill.gpus" in keys
    assert [k for k in keys if f"<code>{heading(k)}</code>" not in page] == []
    entry = page[page.index("### <code>network.<wbr>front_port</code> {#network.front_port"):]
    entry = entry[:entry.index("\n#")]
    assert "<code>30000</code>" in entry and "integer" in entry


def test_a_planted_schema_key_appears_on_the_configuration_page():
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["levers"]["properties"]["planted_lever"] = {
        "enum": ["on", "off"], "description": "a lever planted by the test"}
    defaults = json.loads(json.dumps(DEFAULTS))
    defaults["levers"]["planted_lever"] = "off"
    page = config.reference(schema, defaults)
    entry = page[page.index("### <code>levers.<wbr>planted_lever</code> {#levers.planted_lever .config-key"):]
    entry = entry[:entry.index("\n#")]
    # The values joined by commas (a bare "|" between them split the markdown row of an earlier layout).
    assert '<span class="key-type">one of <code>&quot;on&quot;</code>, <code>&quot;off&quot;</code></span>' in entry
    assert '<span class="key-default"><code>&quot;off&quot;</code></span>' in entry
    assert '<p class="key-description">a lever planted by the test</p>' in entry
    assert "planted" not in config.reference()


def test_exit_codes_guards_and_alerts_come_from_their_sources():
    codes = exit_codes.reference()
    assert all(f"<code>{code}</code>" in codes for code, _ in EXIT_CODES)
    page = guards.reference()
    for guard in GUARDS:
        assert all(issue.split(" #")[1] in page for issue in guard.upstream)
    assert "https://github.com/sgl-project/sglang/issues/33083" in page
    from bundle.config.loader import load_config
    from bundle.monitoring.rules import Thresholds, alerts

    metrics = monitoring.reference()
    for alert in alerts(Thresholds.of(load_config(None).monitoring)):
        assert f"[<code>{alert.name}</code>](../monitoring.md#{alert.runbook})" in metrics
    assert code("sglang:kv_transfer_speed_gb_s_bucket") in metrics and code("smg_worker_health") in metrics


def test_no_generated_page_is_committed():
    assert not (ROOT / "docs" / "reference").exists()
    assert set(PAGES) == {f"reference/{p.name}" for p in map(Path, PAGES)}


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 120
    first_screen = "\n".join(lines[:40])
    assert "make launch TOPOLOGY=pd" in first_screen and re.search(r"^make test\b", first_screen, re.M)
    for guide in re.findall(r"\]\(docs/([^)#]+)\)", "\n".join(lines)):
        assert (ROOT / "docs" / guide).is_file(), guide


@pytest.mark.slow
def test_the_built_site_follows_a_planted_schema_key_and_flag(tmp_path):
    """The real build (mkdocs --strict, the gen-files script) on a copy of the checkout, before and after
    planting a key in bundle.schema.json and a flag in `bundle down`."""
    copy = copy_checkout(tmp_path / "checkout")
    build_site(copy, tmp_path / "before")
    before_cli = (tmp_path / "before/reference/cli.html").read_text()
    before_config = (tmp_path / "before/reference/configuration.html").read_text()
    assert "planted" not in before_cli + before_config and heading("levers.speculative") in before_config

    schema_path = copy / "bundle/config/bundle.schema.json"
    schema = json.loads(schema_path.read_text())
    schema["properties"]["levers"]["properties"]["planted_lever"] = {"type": "boolean",
                                                                    "description": "planted by the docs test"}
    schema_path.write_text(json.dumps(schema))
    down = copy / "bundle/commands/down.py"
    text = down.read_text()
    anchor = "def add_arguments(parser: argparse.ArgumentParser) -> None:\n"
    assert anchor in text
    down.write_text(text.replace(anchor, anchor + '    parser.add_argument("--planted-flag", action="store_true", '
                                                  'help="planted by the docs test")\n', 1))
    build_site(copy, tmp_path / "after")
    after_config = (tmp_path / "after/reference/configuration.html").read_text()
    after_cli = (tmp_path / "after/reference/cli.html").read_text()
    assert heading("levers.planted_lever") in after_config and "planted by the docs test" in after_config
    down_section = after_cli[after_cli.index('id="bundle-down"'):]
    assert '<code><span class="flag">--planted-flag</span></code>' in down_section


def test_docs_links_names_each_broken_external_link_and_its_page(tmp_path, capsys):
    """`make docs-links` against a real HTTP server on loopback: one page that answers, one that is gone."""
    import http.server
    import threading

    from docsgen import links

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(200 if self.path == "/there" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        (tmp_path / "index.html").write_text(f'<a href="{base}/there">ok</a> <a href="page.html">local</a>')
        (tmp_path / "page.html").write_text(f'<a href="{base}/gone">moved</a>')
        assert links.main([str(tmp_path)]) == 1
    finally:
        server.shutdown()
    out = capsys.readouterr().out
    assert f"HTTP 404: {base}/gone (in page.html)" in out and "2 external links, 1 broken" in out
    assert links.main([str(tmp_path / "missing")]) == 2


def test_make_docs_is_strict():
    """`mkdocs build --strict --quiet` passes a broken link: --quiet drops the warnings before --strict
    counts them (mkdocs 1.6). The recipe must not say --quiet."""
    recipe = re.search(r"^docs:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    command = next(line for line in recipe.splitlines() if "mkdocs build" in line)
    assert "--strict" in command and "--quiet" not in command and " -q" not in command


def test_make_docs_needs_only_its_own_hashed_venv(tmp_path):
    """What `make docs` runs in a clone that has nothing installed (`make -n`, GNU make's own plan): a
    venv of its own from requirements/docs.txt, every line of which is pinned with hashes, then the
    build with that venv's mkdocs; nothing of the dev install (host packages, the Docker plugins,
    requirements/dev.txt, torch) and no other venv."""
    make = require_tool("make", "GNU make runs every documented command")
    venv = tmp_path / "docs-venv"
    # --no-print-directory: under a parent make (CI runs `make test`) GNU make would add its
    # "Entering directory" lines to the plan.
    plan = subprocess.run([make, "--no-print-directory", "-n", "docs", f"DOCS_VENV={venv}",
                           f"VENV={tmp_path / 'dev-venv'}"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    commands = [line for line in plan.splitlines() if line.strip()]
    assert commands[0].endswith(f"-m venv {venv}")
    assert f"{venv}/bin/pip install -q --require-hashes -r requirements/docs.txt" in commands[1]
    assert f"{venv}/bin/mkdocs build --strict" in commands[-1]
    assert not [c for c in commands if "dev-venv" in c or "host-packages" in c or "dev.txt" in c or "install-" in c]
    requirements = (ROOT / "requirements" / "docs.txt").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==\S+ \\\n\s+--hash=sha256:", requirements, re.M)
    assert {"mkdocs", "mkdocs-material", "mkdocs-gen-files", "matplotlib", "promql-parser", "pyyaml"} <= set(pins)
    assert len(pins) == len(re.findall(r"^[A-Za-z0-9_.-]+==", requirements, re.M))

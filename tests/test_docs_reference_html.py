"""The reference as a person reads it: the built site (mkdocs build --strict), its HTML parsed with a
real HTML parser, every configuration key's row checked against bundle.schema.json and defaults.yaml
and every CLI argument's row against the argparse parser (tests/docs_reference_check.py). The
generated markdown can look right and still render wrong (a "|" that splits a row): only the HTML
says what a reader gets. Planted errors, in the generator and in the sources, must fail the check."""

from __future__ import annotations

import json

import pytest

from bundle.cli import build_parser
from bundle.config import loader
from tests.conftest import require_module
from tests.docs_site_build import build_site, copy_checkout



@pytest.fixture(scope="module")
def check():
    require_module("bs4", "make install adds it (requirements/dev.txt: beautifulsoup4)")
    from tests import docs_reference_check

    return docs_reference_check


@pytest.fixture(scope="module")
def site(docs_site, check):
    return docs_site


def _sources():
    """bundle.yaml's schema and defaults as the loader assembles them: the core's and every wing's section."""
    return loader.schema(), loader.defaults_data()


def test_every_configuration_row_shows_the_schemas_values_default_and_description(site, check):
    schema, defaults = _sources()
    page = (site / "reference/configuration.html").read_text()
    assert len(check.schema_keys(schema, defaults)) > 100  # the core alone has 130 keys: the check reads them all
    assert check.config_problems(page, schema, defaults) == []
    # The row the issue found broken: all four values, its real default, its description.
    from bs4 import BeautifulSoup

    cells = [check.text(c) for c in check._entries(BeautifulSoup(page, "html.parser"))["levers.speculative"]]
    assert cells[1] == 'one of "none", "mtp", "mtp-light", "dspark"'
    assert cells[2] == json.dumps(defaults["levers"]["speculative"])
    assert cells[3].startswith(schema["properties"]["levers"]["properties"]["speculative"]["description"][:40])


def test_every_cli_row_shows_the_parsers_values_default_and_help(site, check):
    page = (site / "reference/cli.html").read_text()
    parser = build_parser()
    assert len(check.parsers(parser)) > 20
    assert check.cli_problems(page, parser) == []
    # `--rehearsal` alone is stored as a sentinel, not offered as a choice named "default".
    rehearsal = [a for sub in check.parsers(parser).values() for a in sub._actions if "--rehearsal" in a.option_strings]
    assert len(rehearsal) >= 3 and all("default" not in a.choices for a in rehearsal)


def test_a_schema_or_parser_changed_after_the_build_fails_the_check(site, check):
    """The built page against sources that moved on: an enum with a value added, a default changed, a
    CLI flag with a new choice and a new default."""
    schema, defaults = _sources()
    schema["properties"]["levers"]["properties"]["speculative"]["enum"].append("planted")
    defaults["levers"]["kv_cache_dtype"] = "planted"
    problems = check.config_problems((site / "reference/configuration.html").read_text(), schema, defaults)
    assert any(p.startswith("levers.speculative: allowed values shown") for p in problems), problems
    assert any(p.startswith("levers.kv_cache_dtype: default shown") for p in problems), problems

    parser = build_parser()
    render = check.parsers(parser)["bundle render"]
    fmt = next(a for a in render._actions if "--format" in a.option_strings)
    fmt.choices, fmt.default = ("yaml", "json", "toml"), "json"
    problems = check.cli_problems((site / "reference/cli.html").read_text(), parser)
    assert any(p.startswith("bundle render --format: choices shown") for p in problems), problems
    assert any(p.startswith("bundle render --format: default shown") for p in problems), problems


@pytest.mark.slow
def test_a_generator_that_lets_a_pipe_split_a_row_fails_the_check(tmp_path, check):
    """The bug the issue found, planted back into a copy of docsgen: prose that lets a "|" through, and
    a "|" planted in a flag's help, splits the CLI table's row. (The configuration reference has no
    table rows since each key became an entry of its own: a "|" there cannot split anything.)"""
    copy = copy_checkout(tmp_path / "checkout")
    markdown_py = copy / "docsgen/markdown.py"
    source = markdown_py.read_text()
    assert 'out.append(html.escape(part).replace("|", "&#124;")' in source
    markdown_py.write_text(source.replace('out.append(html.escape(part).replace("|", "&#124;")',
                                          "out.append(html.escape(part)"))
    down = copy / "bundle/commands/down.py"
    anchor = "def add_arguments(parser: argparse.ArgumentParser) -> None:\n"
    planted = '    parser.add_argument("--planted-flag", help="planted | with a pipe")\n'
    assert anchor in down.read_text()
    down.write_text(down.read_text().replace(anchor, anchor + planted, 1))
    build_site(copy, tmp_path / "site")

    parser = build_parser()
    check.parsers(parser)["bundle down"].add_argument("--planted-flag", help="planted | with a pipe")
    problems = check.cli_problems((tmp_path / "site/reference/cli.html").read_text(), parser)
    assert any(p.startswith("bundle down --planted-flag: ") for p in problems), problems


def test_links_say_where_they_go_and_no_markdown_leaks_into_text(site, check):
    """Every page as read: no link whose text is a file name, no link from a page to itself (an
    anchor on it is fine), no word between asterisks outside code (emphasis that did not render, or a
    glob such as "--*backend*" that reads as one)."""
    import re

    from bs4 import BeautifulSoup

    problems = []
    for path in sorted(site.rglob("*.html")):
        page = path.relative_to(site).as_posix()
        article = BeautifulSoup(path.read_text(), "html.parser").find("article")
        if article is None:
            continue
        for link in article.find_all("a", href=True):
            shown, href = check.text(link), link["href"]
            if re.fullmatch(r"[\w./-]+\.(md|html)", shown):
                problems.append(f"{page}: a link shown as the file name {shown!r}")
            if href.split("#")[0] == path.name and "#" not in href:
                problems.append(f"{page}: a link to itself ({shown!r})")
        for code in article.find_all(["code", "pre"]):
            code.decompose()
        for starred in re.finditer(r"\*[\w-]+\*", article.get_text()):
            problems.append(f"{page}: a word between asterisks in the text: {starred.group(0)!r}")
    assert problems == []

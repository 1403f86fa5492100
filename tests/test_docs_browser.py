"""The built site in a real browser (Debian's Chromium, headless, over the DevTools protocol:
tests/docs_browser.py), served on loopback under a base path as a project site is. Every page is
loaded at a desktop width (1400 px) and a phone's (390 px) and fails on: the page wider than the
window, a table that scrolls at desktop width or scrolls on a phone without its first column pinned,
content cut off in a box that hides it, a synopsis that does not wrap, the copy button over code
(tests/docs_layout.js); a console error or uncaught exception; a failed request or an HTTP error; any
request that leaves the site; inline code broken after a hyphen; a picture's text too small, cut or
unfinished. A configuration key reads whole; the search lists a key's, a verb's, a kind's or a flag's
definition first; the not-found page is styled under the base path. Planted faults (a wide table, a web
font, a console error, a too-wide block, a tiny cut label, a hyphen-broken flag, an index without its
boosts) must fail it. About a second a page on 2 cores: the second tier (`slow`)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from docsgen.pictures import LEGIBLE_PX
from tests.conftest import require_module, require_tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WIDTHS = {"desktop": 1400, "phone": 390}
BASE = "/sgl/docs/"  # a project site's subpath: nothing may assume the server's root
LAYOUT_JS = (Path(__file__).parent / "docs_layout.js").read_text()
SEARCH_JS = """(async (query) => {
  const input = document.querySelector(".md-search__input");
  input.focus();
  input.value = query;
  input.dispatchEvent(new Event("input", {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent("keyup", {bubbles: true, key: query.slice(-1)}));
  for (let i = 0; i < 200; i++) {  // up to 20 s: the worker loads the index first
    const links = [...document.querySelectorAll(".md-search-result__item a")].map((a) => a.getAttribute("href"));
    if (links.length) return links;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return [];
})"""


@pytest.fixture(scope="module")
def site(docs_site):
    return docs_site


@pytest.fixture(scope="module")
def browser():
    binary = require_tool("chromium", "make install adds it (docker/host-packages.sh: Debian's chromium)")
    require_module("websocket", "make install adds it (requirements/dev.txt: websocket-client)")
    from tests.docs_browser import Chromium

    chromium = Chromium(binary)
    yield chromium
    chromium.close()


def _pages(site: Path) -> list[str]:
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if p.name != "404.html")


def page_problems(browser, root: str, page: str, width: int) -> tuple[list[str], float]:
    """What is wrong with `page` at `width` px, and how long it took to load."""
    load = browser.load(root + page, width)
    origin = root[:-len(BASE) + 1]
    problems = [f"requested outside the site: {url}" for url in load.foreign(origin)]
    problems += load.errors
    problems += browser.evaluate(f"({LAYOUT_JS})({'true' if width >= 1000 else 'false'}, {LEGIBLE_PX})")
    return problems, load.seconds


def test_every_page_at_desktop_and_phone_width(site, browser, capsys):
    from tests.docs_browser import serve

    pages = _pages(site)
    assert len(pages) > 20 and "reference/configuration.html" in pages
    found, seconds = {}, []
    started = time.monotonic()
    with serve(site, BASE) as root:
        for label, width in WIDTHS.items():
            for page in pages:
                problems, took = page_problems(browser, root, page, width)
                seconds.append(took)
                if problems:
                    found[f"{page} at {width} px"] = problems
    with capsys.disabled():
        print(f"\n{len(pages)} pages at {' and '.join(f'{w} px' for w in WIDTHS.values())}: "
              f"{len(seconds)} loads in {time.monotonic() - started:.1f} s, "
              f"{sum(seconds) / len(seconds):.2f} s a load (slowest {max(seconds):.2f} s)")
    assert found == {}


KEY_LINES_JS = """(() => [...document.querySelectorAll(".md-content .config-key code")].map((code) => {
  // Where each line of the key starts: a line may begin only after a dot of it.
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  const chars = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode())
    for (let k = 0; k < node.textContent.length; k++) {
      const range = document.createRange();
      range.setStart(node, k); range.setEnd(node, k + 1);
      chars.push([node.textContent[k], range.getBoundingClientRect().top]);
    }
  const breaks = [];  // the character each new line follows
  for (let i = 1; i < chars.length; i++) if (chars[i][1] > chars[i - 1][1] + 2) breaks.push(chars[i - 1][0]);
  return [code.textContent, breaks];
}))()"""


def test_every_key_reads_whole(site, browser):
    """The configuration reference's keys: one line each at desktop width (a table's key column wrapped
    128 of 177 over 2-4 lines, split at underscores); on a phone a key may go on after one of its dots,
    never inside a name."""
    from tests.docs_browser import serve

    with serve(site, BASE) as root:
        browser.load(root + "reference/configuration.html", WIDTHS["desktop"])
        desktop = browser.evaluate(KEY_LINES_JS)
        browser.load(root + "reference/configuration.html", WIDTHS["phone"])
        phone = browser.evaluate(KEY_LINES_JS)
    assert len(desktop) > 150
    assert [key for key, breaks in desktop if breaks] == []
    assert [(key, breaks) for key, breaks in phone if set(breaks) - {"."}] == []


# The query, and the section the search must list first: a key's own entry, a verb's section, a kind's
# guide; a guide stays first for the word it is about (docsgen/search.py).
FIRST = {
    "front_port": "reference/configuration.html#network.front_port",
    "api_key_file": "reference/configuration.html#api_key_file",
    "speculative": "reference/configuration.html#levers.speculative",
    "levers.speculative": "reference/configuration.html#levers.speculative",
    "DisaggregatedSet": "kubernetes.html#pd-as-one-disaggregatedset-or-as-two-leaderworkersets",
    "bench": "reference/cli.html#bundle-bench",
    "--sbom": "reference/cli.html#bundle-audit",
    "monitoring": "monitoring.html#the-monitoring-profile",
    "rehearsal": "rehearsal.html#the-cpu-engine-rehearsal",
}


def first_sections(browser, root: str, queries) -> dict[str, str]:
    """Each query's first section in the search's results ("page.html#anchor"; the list starts with the
    best page, then its sections)."""
    out = {}
    for query in queries:
        browser.load(root + "index.html", WIDTHS["desktop"])
        links = browser.evaluate(f"({SEARCH_JS})({query!r})")
        sections = [link.removeprefix(root) for link in links if "#" in link]
        out[query] = re.sub(r"\?h=[^#]*", "", sections[0]) if sections else f"nothing of {links}"
    return out


def test_search_lists_a_definition_first(site, browser, tmp_path):
    """A key, a verb, a kind, a flag: its definition is the first section listed. Planted: the same site
    with the index's per-section boosts taken out (the search as the theme alone ranks it) must fail."""
    from tests.docs_browser import serve

    with serve(site, BASE) as root:
        found = first_sections(browser, root, FIRST)
    assert found == FIRST

    planted = tmp_path / "site"
    shutil.copytree(site, planted)
    index_file = planted / "search" / "search_index.json"
    index = json.loads(index_file.read_text())
    assert sum("boost" in doc for doc in index["docs"]) > 150
    for doc in index["docs"]:
        doc.pop("boost", None)
    index_file.write_text(json.dumps(index))
    with serve(planted, BASE) as root:
        unboosted = first_sections(browser, root, ["speculative", "bench"])
    assert unboosted["speculative"] != FIRST["speculative"] and unboosted["bench"] != FIRST["bench"], unboosted


def test_the_not_found_page_is_styled_under_a_base_path(site, browser):
    from tests.docs_browser import serve

    with serve(site, BASE) as root:
        missing = root + "reference/no/such/page.html"
        load = browser.load(missing, WIDTHS["desktop"])
        header = browser.evaluate("getComputedStyle(document.querySelector('.md-header')).position")
        home = browser.evaluate("document.querySelector('article a').href")
        layout = browser.evaluate(f"({LAYOUT_JS})(true, {LEGIBLE_PX})")
    assert header == "sticky", "the theme's stylesheet did not apply"
    assert home == root + "index.html"
    assert load.foreign(root[:-len(BASE) + 1]) == [] and layout == []
    # The page's own 404, and the folders above it asked for the site's stylesheet (a 404 each until
    # the site's root answers): nothing else may fail.
    probes = {missing} | {root[:root.index(BASE) + i + 1] + "stylesheets/extra.css"
                          for i, c in enumerate(BASE) if c == "/" and i < len(BASE) - 1}
    unexpected = [e for e in load.errors if not (e.startswith("HTTP 404: ") and e.removeprefix("HTTP 404: ") in probes)
                  and "status of 404" not in e]
    assert unexpected == []


def test_planted_faults_fail_it(site, browser, tmp_path):
    """A copy of the built site with a fault planted in five pages; each must be named."""
    from tests.docs_browser import serve

    planted = tmp_path / "site"
    shutil.copytree(site, planted)
    faults = {
        "testing.html": "<table><thead><tr>" + "<th>planted_wide_column_header</th>" * 14 + "</tr></thead><tbody><tr>"
                        + "<td>planted_wide_table_cell_without_a_break</td>" * 14 + "</tr></tbody></table>",
        "slurm.html": '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
        "router.html": '<script>console.error("planted console error")</script>',
        "release.html": '<div style="width: 1800px; height: 10px">planted wide block</div>',
        "quickstart.html": '<div class="pictures"><figure><svg viewBox="0 0 1200 100" width="1200" style="width: 100%">'
                           '<text x="0" y="50" font-size="10">planted tiny label, cut\u2026</text><text x="0" y="95" font-size="40">planted title, empty date, </text></svg></figure></div>'
                           '<p style="width: 4ch"><code>--standin-planted</code></p>',
    }
    for page, html in faults.items():
        path = planted / page
        text = path.read_text()
        assert "</article>" in text
        path.write_text(text.replace("</article>", html + "</article>", 1))
    with serve(planted, BASE) as root:
        table = page_problems(browser, root, "testing.html", WIDTHS["desktop"])[0]
        font = page_problems(browser, root, "slurm.html", WIDTHS["phone"])[0]
        console = page_problems(browser, root, "router.html", WIDTHS["phone"])[0]
        block = page_problems(browser, root, "release.html", WIDTHS["desktop"])[0]
        picture = page_problems(browser, root, "quickstart.html", WIDTHS["phone"])[0]
        clean = page_problems(browser, root, "index.html", WIDTHS["phone"])[0]
    assert any("a table scrolls sideways" in p and "planted_wide_column_header" in p for p in table), table
    assert any(p.startswith("requested outside the site: https://fonts.googleapis.com/") for p in font), font
    assert any("planted console error" in p for p in console), console
    assert any(p.startswith("the page is ") and "planted wide block" in p for p in block), block
    assert any(p.startswith("picture text at ") and "planted tiny label" in p for p in picture), picture
    assert any(p.startswith("picture text cut or unfinished") and "planted tiny label" in p for p in picture), picture
    assert any(p.startswith("picture text cut or unfinished") and "empty date" in p for p in picture), picture
    assert any(p.startswith("inline code broken after a hyphen") and "--standin-planted" in p for p in picture), picture
    assert clean == []

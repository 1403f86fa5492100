"""The built site in a real browser (Debian's Chromium, headless, over the DevTools protocol:
tests/docs_browser.py), served on loopback under a base path as a project site is. Every page is
loaded at a desktop width (1400 px) and a phone's (390 px) and fails on: the page wider than the
window, a table that scrolls at desktop width or scrolls on a phone without its first column pinned,
content cut off in a box that hides it, a synopsis that does not wrap, the copy button over code
(tests/docs_layout.js); a console error or uncaught exception; a failed request or an HTTP error; any
request that leaves the site. Search must find a configuration key and a flag, and the not-found page
must be styled under the base path. Planted faults (a wide table, a web font, a console error, a
too-wide block) must fail it. About a second a page on 2 cores: the second tier (`slow`)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import require_module, require_tool
from tests.docs_site_build import ROOT, build_site

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
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    build_site(ROOT, out)
    return out


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
    problems += browser.evaluate(f"({LAYOUT_JS})({'true' if width >= 1000 else 'false'})")
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


def test_search_finds_a_configuration_key_and_a_flag(site, browser):
    from tests.docs_browser import serve

    with serve(site, BASE) as root:
        results = {}
        for query in ("front_port", "--sbom", "levers.speculative"):
            browser.load(root + "index.html", WIDTHS["desktop"])
            results[query] = browser.evaluate(f"({SEARCH_JS})({query!r})")
    assert any("reference/configuration.html" in link and "#network" in link for link in results["front_port"]), \
        results["front_port"]
    assert any("reference/cli.html" in link for link in results["--sbom"]), results["--sbom"]
    assert any("reference/configuration.html" in link for link in results["levers.speculative"])


def test_the_not_found_page_is_styled_under_a_base_path(site, browser):
    from tests.docs_browser import serve

    with serve(site, BASE) as root:
        missing = root + "reference/no/such/page.html"
        load = browser.load(missing, WIDTHS["desktop"])
        header = browser.evaluate("getComputedStyle(document.querySelector('.md-header')).position")
        home = browser.evaluate("document.querySelector('article a').href")
        layout = browser.evaluate(f"({LAYOUT_JS})(true)")
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
    """A copy of the built site with a fault planted in four pages; each must be named."""
    from tests.docs_browser import serve

    planted = tmp_path / "site"
    shutil.copytree(site, planted)
    faults = {
        "testing.html": "<table><thead><tr>" + "<th>planted_wide_column_header</th>" * 14 + "</tr></thead><tbody><tr>"
                        + "<td>planted_wide_table_cell_without_a_break</td>" * 14 + "</tr></tbody></table>",
        "slurm.html": '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
        "router.html": '<script>console.error("planted console error")</script>',
        "release.html": '<div style="width: 1800px; height: 10px">planted wide block</div>',
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
        clean = page_problems(browser, root, "index.html", WIDTHS["phone"])[0]
    assert any("a table scrolls sideways" in p and "planted_wide_column_header" in p for p in table), table
    assert any(p.startswith("requested outside the site: https://fonts.googleapis.com/") for p in font), font
    assert any("planted console error" in p for p in console), console
    assert any(p.startswith("the page is ") and "planted wide block" in p for p in block), block
    assert clean == []

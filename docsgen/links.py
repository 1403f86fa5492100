"""`make docs-links`: every external link of the built site, fetched (a maintainer runs it online; CI
reaches no other site, so `make docs` checks only the site's own links and anchors).

python -m docsgen.links [SITE_DIR]: exit 1 naming each page and link that did not answer 2xx/3xx."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import requests

# The theme's own links (fonts, its home) are not this project's to fix.
IGNORED_PREFIXES = ("https://squidfunk.github.io/", "https://fonts.", "https://www.mkdocs.org/")


class _Hrefs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href") or ""
            if href.startswith(("http://", "https://")) and not href.startswith(IGNORED_PREFIXES):
                self.hrefs.append(href)


def external_links(site: Path) -> dict[str, list[str]]:
    """link -> the pages that hold it."""
    found: dict[str, list[str]] = {}
    for page in sorted(site.rglob("*.html")):
        parser = _Hrefs()
        parser.feed(page.read_text(errors="replace"))
        for href in parser.hrefs:
            found.setdefault(href, []).append(str(page.relative_to(site)))
    return found


def check(url: str, timeout: float = 20.0) -> str | None:
    """None when the link answers; otherwise why not."""
    try:
        response = requests.head(url, allow_redirects=True, timeout=timeout)
        if response.status_code in (403, 405, 429):  # some hosts refuse HEAD or robots: ask with GET
            response = requests.get(url, allow_redirects=True, timeout=timeout, stream=True)
        return None if response.status_code < 400 else f"HTTP {response.status_code}"
    except requests.RequestException as exc:
        return type(exc).__name__


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site")
    if not (site / "index.html").is_file():
        print(f"{site}/index.html is missing: run `make docs` first", file=sys.stderr)
        return 2
    links = external_links(site)
    with ThreadPoolExecutor(8) as pool:
        results = dict(zip(links, pool.map(check, links)))
    broken = {url: why for url, why in results.items() if why}
    for url, why in sorted(broken.items()):
        print(f"{why}: {url} (in {', '.join(sorted(set(links[url])))})")
    print(f"{len(links)} external links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

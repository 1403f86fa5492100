"""The site's search ranks a definition first when the query names it: a configuration key's own entry
(`front_port`, `api_key_file`, `speculative`), a verb's section of the CLI reference (`bench`).
mkdocs-material's search scores a section by its title (weighted a thousand times its text) and offers a
boost only per page (`search.boost` front matter). A page-wide boost on the references put them above the
Monitoring and Kubernetes guides for "monitoring" and "kubernetes", and was still too weak for
"speculative" (the DSpark guide's title) at 2. So each section the generator marks with the class
`search-first` (a key that holds a value, a verb) gets the boost in the built index, per section (the
index's own `boost` field, the one the page boost fills), and is titled there by its own name (`front_port`,
`bench`; its whole path leads its text): a title of `monitoring.scrape_interval` would match "monitoring",
one of `bundle lock set-digest` "DisaggregatedSet" (split at its capitals into "disaggregated set").
Every other section keeps its score."""

from __future__ import annotations

import json
import re
from pathlib import Path

# Measured in the browser (Chromium, 2026-12-06; tests/test_docs_browser.py asserts the ranks): at 3 the
# Development guide's "Benchmarks" still came first for `bench`; at 10 `bundle upgrade` came before the
# Upgrade guide for "upgrade". At 5 every definition asserted comes first and the guides stay first for
# what they are about ("rehearsal", "monitoring", "kubernetes", "upgrade", "DisaggregatedSet").
BOOST = 5
_HEADING = re.compile(r"<h[1-6]\b([^>]*)>")
_ATTR = re.compile(r'(\w+)="([^"]*)"')


def marked(html: str) -> list[str]:
    """The anchors of the headings marked `search-first` in a page's HTML."""
    out = []
    for attrs in map(dict, (_ATTR.findall(m.group(1)) for m in _HEADING.finditer(html))):
        if "search-first" in attrs.get("class", "").split() and attrs.get("id"):
            out.append(attrs["id"])
    return out


def _title_by_its_name(doc: dict) -> None:
    """A key's section titled by the key's own name (`front_port`), its path (`network.front_port`)
    leading its text: titles weigh a thousand times the text, and a boosted `monitoring.scrape_interval`
    would otherwise come first for "monitoring", above the Monitoring guide."""
    whole = re.sub(r"<[^>]+>", "", doc["title"])
    if whole.startswith("bundle "):  # a verb: `bundle bench` titled `bench`
        name = whole.removeprefix("bundle ")
    elif "." in whole and " " not in whole:  # a key: `network.front_port` titled `front_port`
        name = whole.rsplit(".", 1)[1]
    else:
        return
    doc["title"] = f"<code>{name}</code>"
    doc["text"] = f"<p><code>{whole}</code></p>{doc['text']}"


def boost(index_file: Path, locations: set[str]) -> int:
    """Give the sections at `locations` ("page.html#anchor") the boost in the built index; how many."""
    index = json.loads(index_file.read_text(encoding="utf-8"))
    found = 0
    for doc in index["docs"]:
        if doc["location"] in locations:
            doc["boost"] = BOOST
            found += 1
            _title_by_its_name(doc)
    index_file.write_text(json.dumps(index, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return found

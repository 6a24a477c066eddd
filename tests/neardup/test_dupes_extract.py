"""Main text of saved HTML (app/neardup/extract.py) through `read_pages`, as the CLI reads a
folder: words stay apart across blocks, and tables come out as text, not markup.

tests/data/dupes_html/ holds two pages in the shapes of real documentation generators, with
their own words: docbook_reference.html as DocBook XSL writes a reference page (the
PostgreSQL documentation: no <main>, a variablelist of <code> terms ended by <br>, tables of
<code> cells, <code> nested in <code>), and sphinx_library.html as Sphinx does (the Python
documentation: role=main, a captioned table, a definition list, a nested list, <br> lines).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from app.neardup.read import read_pages

PAGES = Path(__file__).parent.parent / "data" / "dupes_html"
WORD = re.compile(r"\w+")  # app/neardup/shingles.py's words


def texts(tmp_path: Path, extractor: str) -> dict[str, str]:
    site = tmp_path / "site"
    shutil.copytree(PAGES, site)
    return dict(read_pages(site, workers=1, extractor=extractor))


def has_run(text: str, words: str) -> bool:
    """Whether the words are consecutive words of the text, each one a word of its own."""
    found, wanted = WORD.findall(text), WORD.findall(words)
    return any(found[i:i + len(wanted)] == wanted for i in range(len(found)))


@pytest.mark.parametrize("extractor", ["auto", "trafilatura"])
def test_docbook_terms_table_cells_and_br_lines_stay_apart(tmp_path, extractor):
    # No <main>: both extractors go through trafilatura's heuristics.
    text = texts(tmp_path, extractor)["docbook_reference.html"]
    for run in ("SHELFDATABASE SHELFHOST SHELFPORT SHELFUSER Default connection parameters",
                "SHELFOPTIONS SHELFSSLMODE SHELFTIMEOUT Shelves are listed",
                "one on a line oak pine birch",
                "Column Description moved_books number of books moved",
                "another shelf by the run read_pairs number of pairs",
                "command line options h host and p port like every",
                "type time p without time zone in the catalog"):
        assert has_run(text, run), run
    assert "|" not in text and "---" not in text
    assert "Prev" not in text and "Navigation" not in text  # the page's own header is not text


@pytest.mark.parametrize(("extractor", "runs"), [
    ("auto", ("Environment Variable Meaning SHELFHOME where the shelves are kept SHELFSIZE",
              "Move book to shelf Woods oak pine Opening hours Monday Tuesday")),
    # trafilatura drops the table's caption, and keeps the rest
    ("trafilatura", ("read together Variable Meaning SHELFHOME where the shelves are kept",
                     "Move book to shelf Woods oak pine Opening hours Monday Tuesday")),
])
def test_sphinx_caption_nested_list_and_br_lines_stay_apart(tmp_path, extractor, runs):
    text = texts(tmp_path, extractor)["sphinx_library.html"]
    for run in runs:
        assert has_run(text, run), run
    assert "|" not in text and "---" not in text and "Copyright" not in text
    if extractor == "auto":  # role=main: that element, so no related-pages navigation
        assert not has_run(text, "General Index")


@pytest.mark.parametrize("extractor", ["auto", "trafilatura"])
def test_the_page_parsed_once_still_gives_its_canonical_url(tmp_path, extractor):
    site = tmp_path / "site"
    shutil.copytree(PAGES, site)
    names = [url for url, _ in read_pages(site, canonical_urls=True, workers=1,
                                          extractor=extractor)]
    assert names == ["docbook_reference.html", "https://docs.example/library/shelf.html"]

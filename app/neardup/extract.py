"""Main text of a saved HTML page for `rearrange dupes`: the element the page marks as main,
or what trafilatura's heuristics take for it, as lines of plain text.

Words never run together across a block: each block-level element and `<br>` is put on
lines of its own before either path reads the text, and trafilatura's result is read from
its tree rather than its text output, which writes tables as "| a | b |" rows under a
"|---|" rule and lets code blocks that a `<br>` separated run together (the PostgreSQL
documentation's `PGDATABASE<br>PGHOST` came out as "PGDATABASEPGHOST").
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml.etree import _Element
    from lxml.html import HtmlElement

# HTML's block-level elements (those a browser lays out as blocks, list items, table parts
# or lines of their own), and <br>: each one ends a word.
HTML_BLOCKS = (
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details",
    "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form",
    "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr", "legend", "li", "listing",
    "main", "menu", "nav", "ol", "optgroup", "option", "p", "plaintext", "pre", "search",
    "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "xmp",
    "br")
_VOID = ("br", "hr")  # no text of their own: only what follows them moves to a new line
# Taken out of a marked main element: what a page marks as besides its main text.
_ASIDE = ("script", "style", "noscript", "template", "nav", "aside", "footer", "form")
# trafilatura's tree: its blocks, and the elements that hold running text, in which a
# <code> is inline; anywhere else a <code> is a code block, a block of its own.
TRAFILATURA_BLOCKS = ("p", "head", "list", "item", "table", "row", "cell", "quote", "lb",
                      "graphic", "div", "note", "figure")
_RUNNING = ("p", "head", "item", "cell", "quote", "hi", "ref", "del", "code", "note")
# Inline code: trafilatura misplaces the text of markup nested inside it (DocBook's
# `<code>-h <em><code>host</code></em></code>` came out as "-h and host"), so what is
# inside is made plain text first.
_CODE = ("code", "kbd", "samp", "tt")
_SPACES = re.compile(r"[^\S\n]+")
_LINES = re.compile(r"\s*\n\s*")


def extract(job: tuple[str, str, bool, str]) -> tuple[str, str]:
    """(url, main text) of one saved page: (file, its name in the folder, canonical_urls,
    extractor). With extractor "auto" a page that marks its main content (`<main>`, or
    role=main) gives that element's text, and a page redirecting elsewhere (meta refresh
    to a URL) none; other pages, and every page with "trafilatura", go through
    trafilatura's heuristics (about ten times slower)."""
    file, name, canonical_urls, extractor = job
    root = _parse(Path(file).read_bytes().decode("utf-8", errors="replace"))
    if root is None:
        return name, ""  # nothing an HTML parser can read: no text
    apart(root.iter(*HTML_BLOCKS))
    if extractor == "auto":
        found = _marked_main(root, canonical_urls)
        if found is not None:
            url, text = found
            return url or name, text
    url, text = _trafilatura_text(root, canonical_urls)
    return url or name, text


def apart(elements: Iterable[_Element]) -> None:
    """Put each element on lines of its own (a void one: what follows it on a new line), so
    its words never run into its neighbours' whatever inline markup surrounds them."""
    for element in list(elements):
        if element.tag not in _VOID:
            element.text = "\n" + (element.text or "")
        element.tail = "\n" + (element.tail or "")


def plain(element: _Element) -> str:
    """The element's text as lines: spaces collapsed, no blank lines, none at the ends."""
    from lxml import etree

    text = etree.tostring(element, method="text", encoding="unicode", with_tail=False)
    return _LINES.sub("\n", _SPACES.sub(" ", text)).strip()


def _parse(html: str) -> HtmlElement | None:
    from lxml import etree
    from lxml import html as lxml_html

    try:
        return lxml_html.document_fromstring(
            html.encode("utf-8"), parser=lxml_html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return None


def _marked_main(root: HtmlElement, canonical_urls: bool) -> tuple[str | None, str] | None:
    """(canonical url or None, text of the page's main element), or None without one."""
    from lxml import html as lxml_html

    url = None
    if canonical_urls:
        declared = _listed(root.xpath("//link[@rel='canonical']/@href | "
                                      "//meta[@property='og:url']/@content"))
        url = str(declared[0]).strip() or None if declared else None
    refresh = _listed(root.xpath(
        "//meta[translate(@http-equiv, 'REFSH', 'refsh') = 'refresh']/@content"))
    if any("url=" in str(r).lower() for r in refresh):
        return url, ""  # a redirect: no text of its own
    mains = [m for m in _listed(root.xpath("//main | //*[@role='main']"))
             if isinstance(m, lxml_html.HtmlElement)]
    if not mains:
        return None
    main = mains[0]
    for element in _listed(main.xpath(" | ".join(f".//{tag}" for tag in _ASIDE))):
        if isinstance(element, lxml_html.HtmlElement):
            element.drop_tree()
    return url, plain(main)


def _trafilatura_text(root: HtmlElement, canonical_urls: bool) -> tuple[str | None, str]:
    """(canonical url or None, main text) by trafilatura's heuristics, read from its tree."""
    import trafilatura
    from lxml import etree

    for code in list(root.iter(*_CODE)):
        etree.strip_tags(code, "*")
    doc = trafilatura.bare_extraction(root, with_metadata=canonical_urls,
                                      include_comments=False, include_tables=True,
                                      favor_precision=True)
    assert not isinstance(doc, dict), "a dict only with as_dict=True"
    if doc is None:
        return None, ""
    url = doc.url if canonical_urls and doc.url else None
    apart(e for e in doc.body.iter(*TRAFILATURA_BLOCKS, "code")
          if e.tag != "code" or _code_block(e))
    return url, plain(doc.body)


def _code_block(element: _Element) -> bool:
    parent = element.getparent()
    return parent is None or parent.tag not in _RUNNING


def _listed(found: object) -> list[object]:
    """What an XPath of nodes or attributes found (lxml types any XPath's result as a
    union of lists, strings, numbers and booleans)."""
    return found if isinstance(found, list) else []

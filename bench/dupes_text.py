"""Benchmark: words glued and table markup left in the main text `rearrange dupes` extracts.

Every page of a folder of saved HTML goes through `read_pages`, the code path of the CLI.
Reference words come from each page's whole <body> with *every* tag taken as a word
boundary (scripts and styles dropped). An extracted word is counted as glued when it is
not a reference word but splits into several that are ("PGDATABASEPGHOST"), each of two
letters or more. Words that a page
itself joins across an inline tag (`<code>os</code>.path`, `Казань<b>ский</b>`) count too,
so the figure is an upper bound; the difference between two runs is what extraction
changed. Table markup is a line of the text such as trafilatura writes a table's rows
("| a | b | ") and the rule under its head ("|---|---|"); ASCII art in a page's own text
can look the same (Python's socketserver.html has a few lines).

Run from the repository root:
`python -m bench.dupes_text DIR [DIR ...] [--extractor auto|trafilatura] [--examples 10]`.
"""
from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from pathlib import Path

from lxml import html as lxml_html

from app.neardup.read import read_pages

WORD = re.compile(r"\w+")
# a row as trafilatura writes tables ("| a | b | "), or its rule under the head ("|---|---|")
MARKUP = re.compile(r"^\|(?:-{3}\|)+\s*$|^\| .* \|\s*$", re.M)


def reference_words(file: Path) -> set[str]:
    """The page's words with every tag a boundary."""
    root = lxml_html.document_fromstring(file.read_bytes())
    for element in list(root.iter("script", "style")):
        if isinstance(element, lxml_html.HtmlElement):
            element.drop_tree()
    body = root.find("body")
    text = " ".join(str(t) for t in (body if body is not None else root).itertext())
    return {w.lower() for w in WORD.findall(text)}


def glued(word: str, known: set[str]) -> bool:
    """Whether the word is unknown but known words of two letters or more put together."""
    w = word.lower()
    if w in known:
        return False
    # ends[i]: w[:i] is known words put together
    ends = [True] + [False] * len(w)
    for i in range(2, len(w) + 1):
        ends[i] = any(ends[j] and w[j:i] in known for j in range(0, i - 1))
    return ends[-1]


def measure(folder: Path, extractor: str) -> tuple[int, int, int, int, Counter[str], float]:
    """(pages, words, glued words, lines of table markup, glued examples, seconds)."""
    started = time.perf_counter()
    pages = list(read_pages(folder, extractor=extractor))
    seconds = time.perf_counter() - started
    words = glue = markup = 0
    examples: Counter[str] = Counter()
    for name, text in pages:
        known = reference_words(folder / name)
        found = WORD.findall(text)
        words += len(found)
        bad = [w for w in found if glued(w, known)]
        glue += len(bad)
        examples.update(bad)
        markup += len(MARKUP.findall(text))
    return len(pages), words, glue, markup, examples, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--extractor", choices=("auto", "trafilatura"), default="auto")
    parser.add_argument("--examples", type=int, default=10)
    args = parser.parse_args()
    for folder in args.folders:
        pages, words, glue, markup, examples, seconds = measure(folder, args.extractor)
        print(f"{folder}: {pages} pages, {words} words, {glue} glued words, "
              f"{markup} lines of table markup ({seconds:.1f} s extracting)")
        if examples:
            print("  most frequent glued: " + ", ".join(
                f"{w} ({n})" for w, n in examples.most_common(args.examples)))


if __name__ == "__main__":
    main()

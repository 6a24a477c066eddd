"""An nginx config as a tree of directives, for the deploy tests to read its upstreams,
servers and locations. Its syntax is `nginx -t`'s to check; this reads only what a valid
file holds: words and quoted strings ended by `;` or opening a `{ … }` block, `#` comments.
(crossplane, NGINX's own parser, has had no release since 2022: not a kept library.)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

TOKEN = re.compile(r"""\s+|\#[^\n]*                 # space, a comment
                       |'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"  # a quoted string
                       |([{};])|([^\s{};'"\#]+)          # punctuation, a word
                    """, re.X)


@dataclass
class Directive:
    name: str
    args: list[str]
    block: list[Directive] | None = None  # the `{ … }` it opens, if any

    def all(self, name: str) -> list[Directive]:
        """The directives of this block named so (not nested deeper)."""
        return [d for d in self.block or [] if d.name == name]

    def first(self, name: str) -> Directive:
        (found,) = self.all(name)
        return found


@dataclass
class _Reader:
    tokens: list[tuple[bool, str]] = field(default_factory=list)  # (punctuation?, text)
    at: int = 0

    def block(self, *, top: bool) -> list[Directive]:
        out: list[Directive] = []
        words: list[str] = []
        while self.at < len(self.tokens):
            punct, text = self.tokens[self.at]
            self.at += 1
            if not punct:
                words.append(text)
            elif text == ";":
                out.append(Directive(words[0], words[1:]))
                words = []
            elif text == "{":
                out.append(Directive(words[0], words[1:], self.block(top=False)))
                words = []
            else:  # "}"
                assert not top and not words, f"unbalanced '}}' after {words}"
                return out
        assert top and not words, "unterminated block or directive"
        return out


def parse(text: str) -> Directive:
    """The whole file, as the block of a root directive named `main`."""
    reader = _Reader()
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        assert m, f"cannot read nginx config at {text[pos:pos + 40]!r}"
        pos = m.end()
        single, double, punct, word = m.groups()
        if punct is not None:
            reader.tokens.append((True, punct))
        elif word is not None:
            reader.tokens.append((False, word))
        elif single is not None or double is not None:
            reader.tokens.append((False, single if single is not None else double))
    return Directive("main", [], reader.block(top=True))

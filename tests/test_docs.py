"""The README and docs/: every relative link resolves, the README stays short and maps docs/.

A moved section or a renamed heading breaks links silently on GitHub; here it fails the
suite, naming the file, the link and what is missing. Anchors are GitHub's heading slugs.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from app.phases import Phase
from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 250
# The READMEs the map links beside docs/: current figures only, as docs/ (CHANGELOG.md is
# the history, so it is not among them).
MAPPED = [*PAGES, ROOT / "bench" / "README.md", ROOT / "deploy" / "README.md"]
HEX_WORD = re.compile(r"(?<![0-9A-Za-z_./-])[0-9a-f]{7,40}(?![0-9A-Za-z_/-])")

FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation but `-` and `_`
    dropped, spaces turned into hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = re.sub(r"[*~]", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match[2])
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link outside code."""
    out = []
    for number, line in prose_lines(path.read_text()):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
                continue
            out.append((number, target))
    return out


def test_slugs_are_githubs():
    assert slug("The CONTRACT's endpoints, with these additions") == (
        "the-contracts-endpoints-with-these-additions")
    assert slug("Precomputed signatures: `documents[i].minhash`") == (
        "precomputed-signatures-documentsiminhash")
    assert slug("The T&S tools: `rearrange banlist`") == "the-ts-tools-rearrange-banlist"
    assert slug("SRM (sample-ratio mismatch)") == "srm-sample-ratio-mismatch"
    assert slug("Near-duplicates (seed 000)") == "near-duplicates-seed-000"


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of a page: a missing file or heading."""
    problems = []
    for number, target in links(page):
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(file_part)).resolve() if file_part else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no file {file_part}")
        elif anchor and dest.suffix != ".md":
            problems.append(f"{where}: an anchor into a file that is not Markdown")
        elif anchor and unquote(anchor) not in anchors(dest):
            problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path):
    problems = broken(page)
    assert not problems, "\n".join(problems)


def test_the_readme_is_short_and_maps_every_doc():
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES, (
        f"README.md has {len(text.splitlines())} lines (at most {README_MAX_LINES}): put the "
        "new text in a file of docs/ and one line for it in the README's map")
    targets = {target.partition("#")[0] for _, target in links(README)}
    unmapped = [doc.name for doc in DOCS if f"docs/{doc.name}" not in targets]
    assert not unmapped, f"docs/ files the README's map does not list: {unmapped}"


def test_the_link_checker_catches_a_missing_file_and_heading(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n\n## A `code` heading\n\n```sh\n# not one\n```\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#a-code-heading) [gone](c.md) [bad](b.md#not-one) [top](#x)\n"
                    "`[in code](nowhere.md)` [web](https://example.com/x.md)\n\n# X\n")
    assert broken(page, tmp_path) == ["a.md:1: c.md: no file c.md",
                                      "a.md:1: b.md#not-one: no heading #not-one in b.md"]


def commit_names(page: Path, repo: Path = ROOT) -> list[str]:
    """`page:line: word` for each word of the page, fenced code included, that names a commit
    of `repo` (git asked once for all the hex words), or without git a hex word of 7 to 12
    characters with letters and digits, the shape of an abbreviated hash."""
    words = [(number, word) for number, line in enumerate(page.read_text().splitlines(), 1)
             for word in HEX_WORD.findall(line)]
    try:
        answer = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "--batch-check=%(objecttype)"],
            input="".join(f"{word}\n" for _, word in words), capture_output=True, text=True,
            check=True).stdout.splitlines()
        commits = [kind == "commit" for kind in answer]
    except (OSError, subprocess.CalledProcessError):  # no git, or not a repository
        commits = [len(word) <= 12 and not word.isdigit() and not word.isalpha()
                   for _, word in words]
    name = page.relative_to(repo) if page.is_relative_to(repo) else page.name
    return [f"{name}:{number}: {word}"
            for (number, word), commit in zip(words, commits, strict=True) if commit]


@pytest.mark.parametrize("page", MAPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_doc_names_a_commit(page: Path):
    found = commit_names(page)
    assert not found, ("docs carry current figures, not history: these name commits "
                       "(say what the figure is of, and put the history in CHANGELOG.md)\n"
                       + "\n".join(found))


def test_the_commit_check_finds_a_commit_of_the_repository(tmp_path):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=9", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    page = tmp_path / "page.md"
    page.write_text(f"Measured at {head}, config version dad2b3699935ba1e, 1000000 entries.\n"
                    f"`python -m bench.http --against {head}`\n")
    assert commit_names(page) == [f"page.md:1: {head}", f"page.md:2: {head}"]


def test_without_git_the_commit_check_goes_by_the_shape_of_a_hash(tmp_path):
    # tmp_path is no repository: a word of 7 to 12 hex characters with letters and digits is
    # taken for a hash, a number or a word of letters alone is not (HEAD's own abbreviation
    # is all digits about one time in 70, so it is no fixture for this)
    page = tmp_path / "page.md"
    page.write_text("Measured at 3f9a0c2d1 on 20261204, deadbeef cafe00, 0123456789abcdef.\n")
    assert commit_names(page, tmp_path) == ["page.md:1: 3f9a0c2d1"]


def rule_rows() -> dict[str, list[str]]:
    """docs/config.md's "Where each rule lives": rule -> its row's cells after the name."""
    text = (ROOT / "docs" / "config.md").read_text()
    section = text.split("## Where each rule lives", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            name, *cells = (cell.strip() for cell in line.strip().strip("|").split("|"))
            rows[name.strip("`")] = cells
    return rows


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_every_rule_is_found_where_config_md_says():
    from app.rules import RULES

    rows = rule_rows()
    assert set(rows) == set(RULES), "docs/config.md's rule map and the engine's catalog differ"
    series = set(re.findall(r"^\| `(rearrange_[a-z0-9_]+)`",
                            (ROOT / "docs" / "metrics.md").read_text(), re.M))
    for name, (engine, tests, metrics, docs) in rows.items():
        (engine,) = code_spans(engine)
        tests = code_spans(tests)
        for path in (engine, *tests):
            assert (ROOT / path).is_file(), f"{name}: {path} does not exist"
        source = (ROOT / engine).read_text()
        assert "#[cfg(test)]" in source, f"{engine} has no unit tests"
        assert f'const NAME: &\'static str = "{name}";' in source, f"{engine} is not {name}"
        assert any(name in (ROOT / t).read_text() for t in tests), f"{name}: no test names it"
        for metric in code_spans(metrics):
            known = ({m for m in series if m.startswith(metric[:-1])} if metric.endswith("*")
                     else {metric} & series)
            assert known, f"{name}: {metric} is not a series of docs/metrics.md"
        (target,) = LINK.findall(docs)
        assert f"`{name}`" in section_of(ROOT / "docs" / "config.md", target), (
            f"{name}: {target} does not name the rule")


def pipeline_rows() -> dict[str, list[str]]:
    """docs/config.md's table of rules under "The pipeline": rule -> cells after the name."""
    text = (ROOT / "docs" / "config.md").read_text()
    section = text.split("## The pipeline", 1)[1].split("\n## ", 1)[0]
    return {cells[0].strip("`"): cells[1:] for line in section.splitlines()
            if line.startswith("| `")
            for cells in [[c.strip() for c in line.strip().strip("|").split("|")]]}


def test_the_pipeline_table_says_what_the_engine_catalog_says():
    # Phases, parameters and defaults as config.md lists them, against the engine's own
    # declaration of each rule (its catalog): the doc cannot drift from the code.
    from app.rules import RULES

    rows = pipeline_rows()
    assert list(rows) == list(RULES), "the pipeline table lists the rules in registry order"
    for name, (phases, params, _behaviour) in rows.items():
        rule = RULES[name]
        in_order = [p.value for p in Phase if p in rule.phases]
        assert phases.split(", ") == in_order, name
        documented = {span.split(":")[0] for span in code_spans(params)}
        assert documented == rule.param_names(), f"{name}: {params}"
        for span in code_spans(params):
            key, sep, value = span.partition(": ")
            default = rule.schema["properties"][key].get("default")
            if sep and value != "{}" and default is not None and not isinstance(default, dict):
                shown = yaml.safe_load(value)
                assert shown == default, f"{name}.{key}: the doc says {value}, the engine {default}"


def section_of(page: Path, target: str) -> str:
    """The text `target` (a link from `page`: file, #heading or both) points at: the whole
    file, or the heading's section up to the next heading of its level or above."""
    file, _, anchor = target.partition("#")
    text = (page.parent / file if file else page).read_text()
    if not anchor:
        return text
    lines = text.splitlines()
    for start, line in enumerate(lines):
        match = HEADING.match(line)
        if match and slug(match[2]) == anchor:
            level = len(match[1])
            end = next((i for i in range(start + 1, len(lines))
                        if (m := HEADING.match(lines[i])) and len(m[1]) <= level), len(lines))
            return "\n".join(lines[start:end])
    raise AssertionError(f"{target}: no such heading")

"""`rearrange dupes --html`: the report loads in headless Chromium, offline and without a
console message, and shows the audit's counts."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from app.cli.main import main
from app.neardup import dupes
from app.neardup import html as dupes_html
from app.neardup.html import side_by_side, svg_histogram
from app.neardup.site import Pairs
from tests.corpus import audit_site, corpus, mixed_site

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def chromium_dom(page, fragment: str = "") -> tuple[str, list[str]]:
    """The DOM after load and the console messages, from headless Chromium (the page's
    address ending in `fragment`)."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed here (apt-get install -y chromium)")
    run = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", "--dump-dom", page.as_uri() + fragment],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    # Every console message (log, error, a CSP refusal, an uncaught exception) is one line.
    return run.stdout, [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


def test_report_loads_offline_with_no_console_message_and_the_counts(tmp_path, capsys):
    pages = tmp_path / "site.jsonl"
    pages.write_text("".join(json.dumps({"url": u, "text": t}) + "\n"
                             for u, t in mixed_site(templates=40, pages=50)), encoding="utf-8")
    report, data = tmp_path / "report.html", tmp_path / "audit.json"
    assert main(["dupes", str(pages), "--no-progress", "--html", str(report),
                 "--json", str(data)]) == 0
    capsys.readouterr()
    html = report.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing to fetch
    dom, console = chromium_dom(report)
    assert console == []
    assert 'data-ready="1"' in dom  # the inline script ran to its end
    audit = json.loads(data.read_bytes())
    counts = dict(re.findall(r'id="count-(\w+)">(\d+)<', dom))
    advice = [v["recommendation"] for v in audit["verdicts"]]
    assert counts == {"pages": "2040", "skipped": "0", "excluded": "0",
                      "pairs": str(len(audit["pairs"])), "clusters": "40", "multi": "40",
                      "blocks": "0", **{name: str(advice.count(name)) for name in
                                        ("canonical", "rewrite", "merge", "noindex", "ok")}}
    assert advice.count("noindex") == 40  # the mixed pages: all their text is the templates'
    assert advice.count("canonical") + advice.count("rewrite") == 2000
    assert dom.count('class="cluster"') == 40 and dom.count('class="multi"') == 40
    assert dom.count('<rect class="bar"') == 10
    assert 0 < dom.count('class="pair"') <= 25


def test_differing_words_are_marked_on_both_sides():
    html = side_by_side("Доставка по городу Казань за день", "Доставка по городу Пермь за день")
    assert '<mark class="a">Казань</mark>' in html and '<mark class="b">Пермь</mark>' in html
    assert html.count("<mark") == 2


def test_histogram_bars_scale_to_the_largest_bin_with_the_threshold_line():
    svg = svg_histogram([(0.0, 0.5, 5), (0.5, 1.0, 10)], 0.5)
    heights = [float(h) for h in re.findall(r'<rect class="bar"[^>]* height="([\d.]+)"', svg)]
    assert heights[1] == 2 * heights[0]
    assert '<title>threshold 0.5</title>' in svg


def test_the_page_shows_the_largest_clusters_and_says_how_many_more(tmp_path, monkeypatch):
    monkeypatch.setattr(dupes_html, "CLUSTERS_SHOWN", 3)
    with dupes.audit(corpus(300, seed=6)) as result:
        html = dupes_html.render_html(result, Pairs.empty())
        assert len(result.clusters) > 3
        assert html.count('class="cluster"') == 3
        assert f"… and {len(result.clusters) - 3} more clusters (all in --json)" in html


@pytest.mark.parametrize("bin_", [9, 0])
def test_a_histogram_bin_lists_its_pages_sorted_by_a_column(tmp_path, capsys, bin_):
    site, _ = audit_site()
    pages = tmp_path / "site.jsonl"
    pages.write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in site),
                     encoding="utf-8")
    report, data = tmp_path / "report.html", tmp_path / "audit.json"
    assert main(["dupes", str(pages), "--no-progress", "--html", str(report),
                 "--json", str(data)]) == 0
    capsys.readouterr()
    audit = json.loads(data.read_bytes())
    # what a click on the bar and on the column's head sets
    dom, console = chromium_dom(report, f"#bin={bin_}&sort=template_share")
    assert console == [] and 'data-ready="1"' in dom
    rows = re.findall(r'<tr ([^>]*)>', dom.split('id="pages"')[1].split("</table>")[0])
    shown = [r for r in rows if 'class="hidden"' not in r]
    assert len(rows) == len(audit["verdicts"])
    assert len(shown) == audit["histogram"][bin_]["pages"] > 0
    count = audit["histogram"][bin_]["pages"]
    assert re.search(rf'id="pages-shown">{len(shown)} of the {count} in the bin<', dom)
    shares = [float(re.search(r'data-template_share="([^"]*)"', r).group(1)) for r in shown]
    assert shares == sorted(shares, reverse=True)
    assert {re.search(r'data-bin="(\d+)"', r).group(1) for r in shown} == {str(bin_)}
    assert dom.count('class="block"') == len(audit["shared_blocks"]) == 2
    counts = dict(re.findall(r'id="count-(\w+)">(\d+)<', dom))
    for name in ("canonical", "rewrite", "merge", "noindex", "ok"):
        assert int(counts[name]) == sum(v["recommendation"] == name for v in audit["verdicts"])

"""`rearrange dupes`: the seed's table on JSON lines and on saved HTML, files, sampling, LSH."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from app.neardup import dupes, minhash
from app.neardup.site import Pairs
from tests.corpus import audit_site, corpus, reworded_site
from tests.neardup.test_shingles import KAZAN, OMSK, PERM, RETURNS

SEED = [("/delivery/kazan", KAZAN), ("/delivery/perm", PERM), ("/delivery/omsk", OMSK),
        ("/blog/returns", RETURNS)]


def write_jsonl(path: Path, pages) -> Path:
    path.write_text("".join(json.dumps({"url": u, "text": t}, ensure_ascii=False) + "\n"
                            for u, t in pages), encoding="utf-8")
    return path


def table_rows(out: str, title: str) -> list[list[str]]:
    """The cells of the rows of the report's table under the line starting with `title`
    (columns are apart by two spaces or more, cells hold single spaces)."""
    lines = out.split("\n" + title, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [re.split(r" {2,}", line.strip()) for line in lines]


def test_seed_table_histogram_clusters_and_files(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "pages.jsonl", SEED)
    code = main(["dupes", str(pages), "--csv", str(tmp_path / "p.csv"),
                 "--json", str(tmp_path / "p.json"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    # The seed's table, with these synthetic pages' own numbers.
    pairs = table_rows(out, "pairs sharing text")
    assert ["/delivery/kazan", "/delivery/perm", "0.71", "0.83", "0.83"] in pairs
    assert ["/delivery/kazan", "/delivery/omsk", "0.47", "0.83", "0.52"] in pairs
    assert ["/delivery/omsk", "/blog/returns", "0.00", "0.00", "0.00"] in pairs
    assert "method: exact, all 6 pairs" in out
    [cluster_row] = table_rows(out, "clusters at the threshold")
    assert cluster_row[:3] == ["1", "3", "/delivery/kazan, /delivery/perm, /delivery/omsk"]
    hist = table_rows(out, "best containment per page")
    assert [h[0] for h in hist] == [f"0.{i}-{(i + 1) / 10:.1f}" for i in range(10)]
    assert [int(h[1]) for h in hist] == [1, 0, 0, 0, 0, 1, 0, 0, 2, 0]  # returns, omsk, 2 more
    bars = [len(h[2]) if len(h) > 2 else 0 for h in hist]  # the fullest bin's bar is 40 long
    assert bars == [20, 0, 0, 0, 0, 20, 0, 0, 40, 0]
    rows = list(csv.DictReader((tmp_path / "p.csv").read_text(encoding="utf-8").splitlines()))
    assert len(rows) == 3 and rows[0]["url_a"] == "/delivery/kazan"  # those at the threshold
    assert rows[0]["url_b"] == "/delivery/perm" and rows[0]["cluster"] == "1"
    assert {r["over_threshold"] for r in rows} == {"1"}
    report = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    [cluster] = report["clusters"]
    assert cluster["representative"] == "/delivery/kazan"
    assert cluster["pages"] == ["/delivery/kazan", "/delivery/perm", "/delivery/omsk"]
    # The delivery template is shared; the city's ten windows and Omsk's sentence are not.
    [before, after] = cluster["template"]
    assert before.startswith("Мы доставляем заказы") and before.endswith("Доставка по городу")
    assert after.startswith("занимает от одного") and after.endswith("о новой дате")
    assert report["pairs"][1] == {"url_a": "/delivery/kazan", "url_b": "/delivery/omsk",
                                  "jaccard": 0.4706, "in": 0.8276, "out": 0.5217}
    assert len(report["pairs"]) == 3 and report["multi_template"] == []
    assert sum(b["pages"] for b in report["histogram"]) == 4


def test_all_candidates_writes_every_pair_found(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "pages.jsonl", SEED)
    assert main(["dupes", str(pages), "--csv", str(tmp_path / "p.csv"), "--all-candidates",
                 "--json", str(tmp_path / "p.json"), "--no-progress"]) == 0
    rows = list(csv.DictReader((tmp_path / "p.csv").read_text(encoding="utf-8").splitlines()))
    assert len(rows) == 6  # a handful of pages: every pair, as the seed prints them
    assert rows[-1]["over_threshold"] == "0" and rows[-1]["jaccard"] == "0.0000"
    assert rows[-1]["cluster"] == ""
    assert len(json.loads((tmp_path / "p.json").read_bytes())["pairs"]) == 6
    capsys.readouterr()


def test_jaccard_measure_leaves_omsk_out_of_the_cluster(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "pages.jsonl", SEED)
    assert main(["dupes", str(pages), "--measure", "jaccard", "--no-progress"]) == 0
    [cluster_row] = table_rows(capsys.readouterr().out, "clusters at the threshold")
    assert cluster_row[:3] == ["1", "2", "/delivery/kazan, /delivery/perm"]


NAV = "<nav><ul>{}</ul></nav>".format("".join(
    f"<li><a href='/c{i}'>Каталог товаров раздел номер {i} скидки и акции недели</a></li>"
    for i in range(12)))
FOOTER = ("<footer><p>© Магазин мебели. Все права защищены. Политика конфиденциальности, "
          "условия доставки и возврата, контакты, карта сайта, вакансии.</p></footer>")


def html_page(title: str, body: str) -> str:
    paragraphs = "".join(f"<p>{s.strip()}.</p>" for s in body.split(".") if s.strip())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body>{NAV}<main><article><h1>{title}</h1>{paragraphs}</article></main>"
            f"{FOOTER}</body></html>")


@pytest.mark.parametrize("extractor", ["auto", "trafilatura"])
def test_html_folder_main_text_only(tmp_path, capsys, extractor):
    site = tmp_path / "site"
    (site / "delivery").mkdir(parents=True)
    (site / "blog").mkdir()
    for name, text in (("kazan", KAZAN), ("perm", PERM), ("omsk", OMSK)):
        (site / "delivery" / f"{name}.html").write_text(html_page(f"Доставка {name}", text),
                                                         encoding="utf-8")
    (site / "blog" / "returns.html").write_text(html_page("Возврат", RETURNS), encoding="utf-8")
    (site / "notes.txt").write_text("not a page")
    assert main(["dupes", str(site), "--no-progress", "--json", str(tmp_path / "r.json"),
                 "--all-candidates", "--extractor", extractor]) == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["pages"] == 4
    assert [c["pages"] for c in report["clusters"]] == [
        ["delivery/kazan.html", "delivery/omsk.html", "delivery/perm.html"]]
    by_pair = {(p["url_a"], p["url_b"]): p for p in report["pairs"]}
    # The menu and footer are on every page; had they been kept, the article would share
    # dozens of shingles with the delivery pages. trafilatura left only the main text.
    returns = [p for key, p in by_pair.items() if "blog/returns.html" in key]
    assert returns and all(p["jaccard"] == 0 for p in returns)
    assert by_pair[("delivery/kazan.html", "delivery/perm.html")]["in"] >= 0.75
    capsys.readouterr()


def test_canonical_urls_name_saved_pages_when_declared(tmp_path, capsys):
    site = tmp_path / "site"
    site.mkdir()
    for name, text in (("kazan", KAZAN), ("perm", PERM)):
        page = html_page(name, text).replace(
            "<head>", f"<head><link rel='canonical' href='https://shop.example/{name}'>")
        (site / f"{name}.html").write_text(page, encoding="utf-8")
    (site / "omsk.html").write_text(html_page("omsk", OMSK), encoding="utf-8")
    assert main(["dupes", str(site), "--no-progress", "--canonical-urls"]) == 0
    [cluster_row] = table_rows(capsys.readouterr().out, "clusters at the threshold")
    assert cluster_row[:3] == ["1", "3",
                               "https://shop.example/kazan, omsk.html, https://shop.example/perm"]


def test_missing_trafilatura_says_how_to_install(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "a.html").write_text(html_page("A", KAZAN), encoding="utf-8")
    code = ("import sys; sys.modules['trafilatura'] = None\n"  # import now raises ImportError
            "from app.cli.main import main\n"
            "sys.exit(main(['dupes', sys.argv[1], '--no-progress']))")
    run = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1
    assert "needs trafilatura" in run.stderr and "pip install 'rearrange[audit]'" in run.stderr


@pytest.mark.parametrize(("content", "message"), [
    ('{"url": "/a", "text": "x"}\nnot json\n', "pages.jsonl:2: not valid JSON"),
    ('{"text": "x"}\n', "pages.jsonl:1: `url` must be a non-empty string"),
    ('{"url": "/a", "text": 5}\n', "pages.jsonl:1: `text` must be a string"),
    ('[1, 2]\n', "pages.jsonl:1: expected an object"),
])
def test_bad_jsonl_names_the_line(tmp_path, capsys, content, message):
    (tmp_path / "pages.jsonl").write_text(content)
    assert main(["dupes", str(tmp_path / "pages.jsonl"), "--no-progress"]) == 1
    assert message in capsys.readouterr().err


def test_missing_input_and_bad_options(tmp_path, capsys):
    assert main(["dupes", str(tmp_path / "nope.jsonl"), "--no-progress"]) == 1
    assert "no such file or folder" in capsys.readouterr().err
    pages = write_jsonl(tmp_path / "p.jsonl", SEED)
    assert main(["dupes", str(pages), "--width", "0"]) == 2
    assert "--width must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["dupes", str(pages), "--threshold", "1.5"])


def test_pages_without_words_are_reported_not_compared(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", [*SEED, ("/empty", ""), ("/dots", "... —")])
    assert main(["dupes", str(pages), "--no-progress"]) == 0
    assert "pages: 4 with text, 2 without any words (left out)" in capsys.readouterr().out


def test_sample_near_the_threshold_and_progress_bar(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", corpus(120, seed=5))
    assert main(["dupes", str(pages), "--sample", "25", "--margin", "0.2", "--progress",
                 "--csv", str(tmp_path / "p.csv"), "--json", str(tmp_path / "p.json")]) == 0
    captured = capsys.readouterr()
    [title] = [line for line in captured.out.splitlines() if line.endswith(
        " pairs near the threshold to open and judge by eye:")]
    rows = table_rows(captured.out, title)
    assert 0 < len(rows) == int(title.split()[0]) <= 25
    for _, _, _, inside, outside in rows:
        assert abs(max(float(inside), float(outside)) - 0.5) <= 0.2
    for stage in ("reading", "shingling", "comparing", "clustering", "writing csv",
                  "writing json"):
        assert stage in captured.err
    assert "100%" in captured.err


def pair_set(result: dupes.Audit, p: Pairs) -> dict[tuple[int, int], int]:
    return dict(zip(zip(p.a.tolist(), p.b.tolist(), strict=True), p.both.tolist(), strict=True))


def test_lsh_finds_the_exact_clusters_on_a_generated_site():
    texts = corpus(700, seed=8)
    with dupes.audit(texts, method="exact") as exact, \
            dupes.audit(texts, method="minhash") as approx:
        assert approx.lsh is not None and exact.lsh is None
        over, found = pair_set(exact, exact.over()), pair_set(approx, approx.over())
        assert len(over) > 200
        assert found.keys() <= over.keys()  # candidates are scored exactly: no invented pairs
        assert len(found) / len(over) >= 0.95
        every = pair_set(exact, exact.pairs)
        assert all(every[key] == both for key, both in pair_set(approx, approx.pairs).items())


def test_lsh_jaccard_floor_for_containment():
    # A share t of A inside B with |B| <= R|A| means J >= t / (1 + R - t).
    assert dupes.lsh_jaccard_floor("containment", 0.5, 2.0) == pytest.approx(0.2)
    assert dupes.lsh_jaccard_floor("jaccard", 0.5, 2.0) == 0.5


def test_exclude_leaves_pages_out_by_name_or_last_component(tmp_path, capsys):
    site = tmp_path / "site"
    (site / "book").mkdir(parents=True)
    for name, text in (("kazan", KAZAN), ("perm", PERM)):
        (site / "book" / f"{name}.html").write_text(html_page(name, text), encoding="utf-8")
    # an index holding every page: excluded, it can neither bridge nor crowd the report
    (site / "print.html").write_text(html_page("all", KAZAN + " " + RETURNS), encoding="utf-8")
    (site / "book" / "print.html").write_text(html_page("all", PERM), encoding="utf-8")
    assert main(["dupes", str(site), "--no-progress", "--exclude", "print.html",
                 "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["excluded"] == ["book/print.html", "print.html"]
    assert report["pages"] == 2 and report["params"]["exclude"] == ["print.html"]
    assert "2 with text, 0 without any words (left out), 2 excluded" in capsys.readouterr().out
    pages = write_jsonl(tmp_path / "p.jsonl", SEED)
    assert main(["dupes", str(pages), "--no-progress", "--exclude", "/delivery/*"]) == 0
    assert "pages: 1 with text" in capsys.readouterr().out


def test_lsh_bands_and_rows_come_from_the_threshold_and_the_weights(tmp_path, capsys):
    pages = write_jsonl(tmp_path / "p.jsonl", corpus(300, seed=4))
    floor = dupes.lsh_jaccard_floor("containment", 0.5, 2.0)
    for weights in ((0.5, 0.5), (0.2, 0.8)):
        bands, rows = minhash.lsh_params(floor, 128, *weights)
        assert main(["dupes", str(pages), "--method", "minhash", "--no-progress",
                     "--lsh-weights", ",".join(map(str, weights))]) == 0
        assert f"MinHash LSH ({bands} bands x {rows} rows)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["dupes", str(pages), "--lsh-weights", "1"])
    assert "expected two numbers FP,FN" in capsys.readouterr().err


def test_verdicts_blocks_and_recommendations_in_the_report_and_files(tmp_path, capsys):
    site, truth = audit_site()
    pages = write_jsonl(tmp_path / "site.jsonl", site)
    assert main(["dupes", str(pages), "--verdicts", str(tmp_path / "v.csv"),
                 "--json", str(tmp_path / "a.json"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    rows = list(csv.DictReader((tmp_path / "v.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["url"] for r in rows] == [u for u, _ in site]  # one a page, in the input's order
    by_url = {r["url"]: r for r in rows}
    assert by_url["/thin"]["recommendation"] == "merge"
    assert by_url["/thin"]["target"] == truth["merge"]["/thin"]
    assert by_url["/thin"]["nearest_share"] == "1.0" and by_url["/thin"]["cluster"] == ""
    assert by_url["/includes/notice"]["recommendation"] == "noindex"
    assert float(by_url["/includes/notice"]["block_share"]) == 1.0
    assert by_url["/mixed/0"]["multi_template"] == "1"
    for copy, original in truth["copies"].items():
        assert (by_url[copy]["recommendation"], by_url[copy]["target"]) == ("canonical", original)
        assert by_url[copy]["cluster"] == by_url[original]["cluster"] != ""
    for url in ("/u/3", "/notice/4"):
        row = by_url[url]
        assert row["recommendation"] == "ok" and row["cluster"] == ""
        shares = float(row["unique_share"]) + float(row["block_share"])
        assert shares == pytest.approx(1.0, abs=0.06)  # a block's edges are shingles of both
    report = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert [v["url"] for v in report["verdicts"]] == [r["url"] for r in rows]
    assert sorted(sorted(p["url"] for p in b["pages"]) for b in report["shared_blocks"]) == sorted(
        truth["blocks"])
    recommended = {r[1]: int(r[0]) for r in table_rows(out, "recommendations")}
    assert recommended == {name: sum(r["recommendation"] == name for r in rows)
                           for name in ("canonical", "rewrite", "merge", "noindex", "ok")}
    blocks = table_rows(out, "shared blocks")
    assert sorted(int(b[0]) for b in blocks) == [30, 31] and {b[1] for b in blocks} == {"0.07"}


def test_reworded_says_how_it_compares_and_refuses_signatures(tmp_path, capsys):
    site, _ = reworded_site(templates=3, pages=6, unique=100)
    pages = write_jsonl(tmp_path / "site.jsonl", site)
    assert main(["dupes", str(pages), "--reworded", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "threshold: max(in, out) >= 0.25" in out and "distinctive words" in out
    rows = table_rows(out, "clusters at the threshold")
    assert sorted(int(r[1]) for r in rows) == [6, 6, 6]
    assert main(["dupes", str(pages), "--reworded", "--threshold", "0.3",
                 "--no-progress"]) == 0
    assert "threshold: max(in, out) >= 0.3" in capsys.readouterr().out
    assert main(["dupes", str(pages), "--reworded", "--signatures",
                 str(tmp_path / "s.jsonl"), "--no-progress"]) == 2
    assert "--signatures" in capsys.readouterr().err
    assert not (tmp_path / "s.jsonl").exists()

"""Pages for `rearrange dupes` (app/neardup/read.py) and how the audit holds their texts."""
from __future__ import annotations

import io
import multiprocessing
import re

from app.cli.progress import ProgressBar
from app.neardup import dupes
from app.neardup.read import POOL_MIN_FILES, excluded, extract, read_pages
from app.neardup.site import Texts
from tests.corpus import corpus
from tests.neardup.test_dupes import html_page
from tests.neardup.test_shingles import KAZAN, OMSK, PERM


def test_exclude_globs_match_the_name_or_its_last_component():
    assert excluded("print.html", ["print.html"])
    assert excluded("book/ch1/print.html", ["print.html"])
    assert excluded("api/a/b.html", ["api/*"])
    assert not excluded("book/api/b.html", ["api/*"])
    assert excluded("https://shop.example/tag/x", ["*/tag/*"])
    assert not excluded("book/index.html", ["print.html", "api/*"])


def test_a_marked_main_element_gives_its_text_without_what_it_marks_as_aside(tmp_path):
    page = tmp_path / "p.html"
    page.write_text(
        "<html><head><link rel='canonical' href='https://shop.example/p'></head><body>"
        "<nav>Каталог Акции</nav><main><nav>Хлебные крошки</nav><h1>Доставка</h1>"
        "<p>по городу</p><p>Казань<b>ский</b> район</p><aside>Реклама</aside>"
        "<script>var x = 1;</script></main><footer>© Магазин</footer></body></html>",
        encoding="utf-8")
    url, text = extract((str(page), "p.html", True, "auto"))
    assert url == "https://shop.example/p"
    assert text == "Доставка\nпо городу\nКазаньский район"  # blocks apart, inline kept whole


def test_a_redirect_has_no_text_and_an_unmarked_page_goes_to_trafilatura(tmp_path):
    stub = tmp_path / "old.html"
    stub.write_text("<html><head><meta http-equiv='Refresh' content='0;URL=new.html'></head>"
                    "<body><p>Redirecting to new.html...</p></body></html>", encoding="utf-8")
    assert extract((str(stub), "old.html", False, "auto")) == ("old.html", "")
    plain = tmp_path / "plain.html"
    plain.write_text(html_page("Доставка", KAZAN).replace("<main>", "").replace("</main>", ""),
                     encoding="utf-8")
    url, text = extract((str(plain), "plain.html", False, "auto"))
    assert "Доставка по городу Казань" in text and "Каталог товаров" not in text


def test_main_text_is_extracted_in_worker_processes_as_in_one(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    count = POOL_MIN_FILES + 6
    for n in range(count):
        text = (KAZAN, PERM, OMSK)[n % 3].replace("заказы", f"заказы номер {n}")
        (site / f"p{n:03}.html").write_text(html_page(f"page {n}", text), encoding="utf-8")
    alone = list(read_pages(site, workers=1))
    err = io.StringIO()
    bar = ProgressBar(err)
    pages = read_pages(site, workers=2, progress=bar)
    first = next(pages)
    workers = len(multiprocessing.active_children())  # the pool, while it extracts
    pooled = [first, *pages]
    bar.close()  # off a terminal the bars are printed as they ended
    assert workers == 2
    assert re.search(rf"^extracting .* 100% {count}/{count} ", err.getvalue(), re.M)
    assert pooled == alone and len(alone) == count
    assert alone[5][0] == "p005.html" and "заказы номер 5" in alone[5][1]


def test_every_stage_reports_progress():
    err = io.StringIO()
    with ProgressBar(err) as bar, dupes.audit(corpus(400, seed=2), method="minhash",
                                              progress=bar) as r:
        assert r.lsh is not None
    stages = [line.split()[0] for line in err.getvalue().replace("\r", "\n").splitlines()
              if line.strip()]
    order = list(dict.fromkeys(stages))
    assert order == ["shingling", "signatures", "candidates", "verifying", "multi-template",
                     "clustering", "blocks"]
    assert "100%" in err.getvalue().split("clustering")[-1]


def test_texts_are_kept_on_disk_and_read_back_by_page():
    texts = Texts()
    try:
        for t in ("Казань", "", "Пермь и Омск", "x" * 10_000):
            texts.add(t)
        assert len(texts) == 4 and texts.get(2) == "Пермь и Омск" and texts.get(1) == ""
        assert [t for batch in texts.batches(3) for t in batch] == [
            "Казань", "", "Пермь и Омск", "x" * 10_000]
        assert texts.get(0) == "Казань"  # after a batch read, a lookup seeks again
    finally:
        texts.close()

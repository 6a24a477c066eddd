import json
import math
import os
import subprocess
import sys

import mmh3
import pytest

from app.neardup.shingles import (
    MEASURES,
    Similarity,
    compare,
    containment,
    find_duplicates,
    jaccard,
    score,
    shingles,
    words,
)

# Synthetic pages in the spirit of the design note: one delivery template, the city
# appears once in the middle, Omsk gets one long sentence appended, plus an unrelated
# article about returns.
TEMPLATE = (
    "Мы доставляем заказы быстро и аккуратно. Курьер привозит посылку в удобное для вас "
    "время, а перед приездом звонит и уточняет адрес. Доставка по городу {city} занимает "
    "от одного до трёх рабочих дней. Стоимость зависит от веса и размера заказа, при покупке "
    "от пяти тысяч рублей доставка бесплатная. Оплатить заказ можно картой или наличными при "
    "получении. Если вас нет дома, курьер оставит извещение и договорится о новой дате."
)
EXTRA = (
    " Зимой из-за морозов и снежных заносов на дорогах курьеры иногда задерживаются, поэтому "
    "мы заранее предупреждаем покупателей по телефону или в сообщении и бесплатно переносим "
    "доставку на любой другой удобный день недели без доплаты."
)
KAZAN = TEMPLATE.format(city="Казань")
PERM = TEMPLATE.format(city="Пермь")
OMSK = TEMPLATE.format(city="Омск") + EXTRA
RETURNS = (
    "Вернуть товар надлежащего качества можно в течение четырнадцати дней после покупки. "
    "Сохраните чек, упаковку и ярлыки. Деньги возвращаются на карту, с которой оплачивали, "
    "обычно за несколько дней. Бракованный товар принимаем в течение гарантийного срока, "
    "а экспертизу проводим за свой счёт."
)


# --- tokenisation -------------------------------------------------------------------


def test_words_handles_cyrillic_punctuation_digits_and_case():
    text = "Доставка в КАЗАНЬ — 3 дня! Ёлки, палки."
    assert words(text) == ["доставка", "в", "казань", "3", "дня", "ёлки", "палки"]


def test_shingles_ignore_case_and_punctuation():
    assert shingles("Доставка ПО Казани, быстро!", width=2) == shingles(
        "доставка по казани быстро", width=2
    )


# --- formulas on hand-computed sets -------------------------------------------------


def test_one_changed_last_word_width_2():
    # {ab, bc, cd} vs {ab, bc, ce}: 2 shared of 4 in the union, 2 of 3 on each side.
    a, b = shingles("a b c d", width=2), shingles("a b c e", width=2)
    assert len(a) == len(b) == 3
    assert jaccard(a, b) == 2 / 4
    assert containment(a, b) == 2 / 3
    assert containment(b, a) == 2 / 3


def test_containment_is_asymmetric():
    # {ab, bc} lies wholly inside {ab, bc, cd}.
    a, b = shingles("a b c", width=2), shingles("a b c d", width=2)
    assert compare(a, b) == Similarity(jaccard=2 / 3, contained=1.0, contains=2 / 3)
    assert compare(b, a) == Similarity(jaccard=2 / 3, contained=2 / 3, contains=1.0)


def test_repeated_windows_count_once():
    # "a b a b a" has windows ab, ba, ab, ba: a set of two.
    assert len(shingles("a b a b a", width=2)) == 2


def test_score_maps_measures():
    a, b = shingles("a b c", width=2), shingles("a b c d", width=2)
    assert MEASURES == ("containment", "jaccard")
    assert score("containment", a, b) == 1.0  # lower-ranked a is inside b
    assert score("containment", b, a) == 2 / 3
    assert score("jaccard", a, b) == score("jaccard", b, a) == 2 / 3


# --- short and empty texts ----------------------------------------------------------


def test_short_text_is_one_shingle_of_all_words():
    short = shingles("Доставка по Казани")  # 3 words < default width 10
    assert len(short) == 1
    assert short == shingles("доставка по казани", width=3)
    assert jaccard(short, shingles("ДОСТАВКА по Казани!")) == 1.0
    assert jaccard(short, shingles("Доставка по Перми")) == 0.0


def test_text_of_exactly_width_words_is_one_shingle():
    assert len(shingles("a b c", width=3)) == 1
    assert len(shingles("a b c d", width=3)) == 2


@pytest.mark.parametrize("text", ["", "   ", "!!! — ...", "\n\t"])
def test_text_without_words_has_no_shingles(text):
    assert shingles(text) == frozenset()


def test_empty_sets_are_not_duplicates():
    empty, some = frozenset(), shingles("a b c", width=2)
    assert jaccard(empty, empty) == 0.0
    assert containment(empty, empty) == 0.0
    assert containment(empty, some) == 0.0
    assert containment(some, empty) == 0.0
    assert compare(empty, empty) == Similarity(0.0, 0.0, 0.0)


# --- hash stability -----------------------------------------------------------------


def test_shingle_hashes_are_unsigned_64_bit_murmur3():
    # Pinned: the audit tool may store these ints, so the function must not drift.
    expected = mmh3.hash64("доставка по казани", seed=0, signed=False)[0]
    assert shingles("Доставка по Казани", width=3) == frozenset({expected})
    assert all(0 <= h < 2**64 for h in shingles(OMSK))


@pytest.mark.parametrize("hashseed", ["1", "2"])
def test_shingle_hashes_are_stable_across_processes(hashseed):
    code = (
        "import json, sys\n"
        "from app.neardup.shingles import shingles\n"
        "print(json.dumps(sorted(shingles(sys.argv[1]))))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    out = subprocess.run(
        [sys.executable, "-c", code, KAZAN],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == sorted(shingles(KAZAN))


# --- the design note's synthetic example --------------------------------------------


def test_template_pages_differing_by_city_are_near_duplicates():
    kazan, perm = shingles(KAZAN), shingles(PERM)
    n = len(words(KAZAN)) - 10 + 1
    # The city sits mid-text, so it spoils exactly 10 windows on each side.
    shared = n - 10
    sim = compare(kazan, perm)
    assert sim == Similarity(shared / (n + 10), shared / n, shared / n)
    assert sim.jaccard > 0.5
    assert sim.contained > 0.5 and sim.contains > 0.5


def test_added_sentence_drops_jaccard_but_not_containment():
    kazan, omsk = shingles(KAZAN), shingles(OMSK)
    sim = compare(kazan, omsk)
    assert sim.jaccard < 0.5  # below the published threshold...
    assert sim.contained >= 0.5  # ...yet most of Kazan lies inside Omsk
    assert sim.contained == compare(kazan, shingles(PERM)).contained
    assert sim.contains < sim.contained


@pytest.mark.parametrize("page", [KAZAN, PERM, OMSK])
def test_unrelated_article_scores_zero(page):
    assert compare(shingles(page), shingles(RETURNS)) == Similarity(0.0, 0.0, 0.0)
    assert compare(shingles(RETURNS), shingles(page)) == Similarity(0.0, 0.0, 0.0)


# --- find_duplicates ----------------------------------------------------------------


def test_find_duplicates_on_the_example_by_containment():
    kazan, perm, omsk = shingles(KAZAN), shingles(PERM), shingles(OMSK)
    assert find_duplicates([KAZAN, PERM, OMSK, RETURNS]) == [
        (1, 0, containment(perm, kazan)),
        (2, 0, containment(omsk, kazan)),
    ]


def test_find_duplicates_on_the_example_by_jaccard_keeps_omsk():
    folded = find_duplicates([KAZAN, PERM, OMSK, RETURNS], measure="jaccard")
    assert [(i, j) for i, j, _ in folded] == [(1, 0)]


def test_find_duplicates_folds_the_lower_ranked_page():
    # Kazan lies inside Omsk; ranked below it, Kazan is the one folded.
    kazan, omsk = shingles(KAZAN), shingles(OMSK)
    assert find_duplicates([OMSK, KAZAN]) == [(1, 0, containment(kazan, omsk))]


def test_find_duplicates_takes_first_kept_match_not_best():
    # "c d e" is half inside doc 0 and wholly inside doc 1; rank wins over score.
    texts = ["a b c d", "x y c d e", "c d e"]
    assert score("containment", shingles(texts[2], 2), shingles(texts[1], 2)) == 1.0
    assert find_duplicates(texts, width=2) == [(2, 0, 0.5)]


def test_find_duplicates_does_not_chain_through_folded_docs():
    # b is folded under a; c matches b but not a, so c stays kept.
    a, b, c = "a b c d", "b c d e", "c d e f"
    assert score("containment", shingles(c, 2), shingles(b, 2)) >= 0.5
    assert score("containment", shingles(c, 2), shingles(a, 2)) < 0.5
    assert find_duplicates([a, b, c], width=2) == [(1, 0, 2 / 3)]


def test_find_duplicates_skips_none_and_empty_texts():
    texts = [None, "", "a b c", "...", "a b c", None, ""]
    assert find_duplicates(texts, width=2) == [(4, 2, 1.0)]
    assert find_duplicates([None, None, "", ""]) == []


def test_find_duplicates_threshold_one_needs_full_containment():
    assert find_duplicates(["a b c d", "a b c"], width=2, threshold=1.0) == [(1, 0, 1.0)]
    assert find_duplicates(["a b c d", "a b c e"], width=2, threshold=1.0) == []


# --- validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"measure": "cosine"}, "measure"),
        ({"width": 0}, "width"),
        ({"width": -3}, "width"),
        ({"threshold": 0}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": math.nan}, "threshold"),
    ],
)
def test_find_duplicates_rejects_bad_arguments(kwargs, argument):
    # Validated up front, even when there is nothing to compare.
    with pytest.raises(ValueError, match=rf"^{argument} "):
        find_duplicates([], **kwargs)


def test_score_rejects_unknown_measure():
    with pytest.raises(ValueError, match=r"^measure must be one of .*'cosine'"):
        score("cosine", frozenset({1}), frozenset({1}))


def test_shingles_rejects_zero_width():
    with pytest.raises(ValueError, match=r"^width must be >= 1, got 0"):
        shingles("a b c", width=0)

"""Times and durations as the T&S tools take them."""
from __future__ import annotations

import pytest

from app.cli.main import main
from app.timespec import parse_duration, parse_time

NOW = 1_750_000_000.0


@pytest.mark.parametrize(("text", "seconds"), [
    ("3600", 3600), ("90m", 5400), ("36h", 129_600), ("7d", 604_800), ("2w", 1_209_600),
    ("1.5h", 5400), (" 7d ", 604_800), ("1s", 1),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "problem"), [
    ("7 days", "is not a duration"), ("-5", "is not a duration"), ("", "is not a duration"),
    ("0", "at least 1"), ("0.5s", "whole number"), ("1.0001m", "whole number"),
])
def test_what_is_not_a_duration_says_what_is(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_duration(text)


def test_an_age_is_the_same_duration_back_from_now():
    for text in ("90m", "36h", "7d", "2w"):
        assert parse_time(text, NOW) == NOW - parse_duration(text)


def test_banlist_add_refuses_a_bad_ttl_before_calling_the_service(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["banlist", "add", "host", "x.example", "--reason", "r", "--ttl", "7 days"])
    assert exit_.value.code == 2
    assert "--ttl: '7 days' is not a duration" in capsys.readouterr().err

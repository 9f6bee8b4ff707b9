"""The linear-time topic regex matcher against Python's re (the syntax both share), and its bounds."""

from __future__ import annotations

import re
import time

import pytest

from vqs.server.kafka.topic_regex import MAX_PROGRAM, RegexError, TopicRegex

PATTERNS = ["(^re-.*)", "re-.*", "^orders\\.(eu|us)-[0-9]+$", "a|b|c", "x{2,3}y?", "[^_].*", "(?:ab)+",
            "(?P<n>t)\\d{2}", "t[a-c\\d]*", ".", "", "a*a*a*", "(a|ab)(c|bcd)(d*)", "[-a]+", "[]a]", "\\w+\\.\\W?"]
NAMES = ["re-a", "re-", "are-a", "orders.eu-12", "orders.fr-1", "a", "b", "ab", "xx", "xxxy", "xxxxy", "_x",
         "abab", "t12", "tab1", "", "abcd", "-a-", "]", "ok.", "ok.!", "t"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_it_matches_whole_names_as_re_fullmatch(pattern):
    rx, ref = TopicRegex(pattern), re.compile(pattern)
    for name in NAMES:
        assert rx.fullmatch(name) == bool(ref.fullmatch(name)), (pattern, name)


def test_a_backtracking_bomb_is_linear():
    rx = TopicRegex("(a*)*b")
    start = time.monotonic()
    assert not rx.fullmatch("a" * 249)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("pattern", ["(?=a)", "(a)\\1", "(?i)a", "\\bx", "(", "a)", "*a", "[a", "a{3,1}",
                                     "x" * 1001, "((a{1000}){1000})"])
def test_what_it_cannot_match_safely_is_refused(pattern):
    with pytest.raises(RegexError):
        TopicRegex(pattern)
    assert MAX_PROGRAM == 10_000

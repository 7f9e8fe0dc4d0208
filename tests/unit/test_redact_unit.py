"""Credentials in URLs, masked for messages, records and logs."""

from __future__ import annotations

import pytest

from govsync import redact


@pytest.mark.parametrize(("given", "masked"), [
    ("postgresql://ci:hunter2@db:5432/govsync", "postgresql://ci:***@db:5432/govsync"),
    ("postgresql://ci:hunter2@db/govsync?sslmode=require&password=s3",
     "postgresql://ci:***@db/govsync?sslmode=***&password=***"),
    ("https://api.example.com/v1?token=abc&b=2#frag", "https://api.example.com/v1?token=***&b=***#frag"),
    ("https://api.example.com/?a=1&b=&c=3", "https://api.example.com/?a=***&b=***&c=***"),
    ("https://u:p:q@h/", "https://u:***@h/"),
    ("https://u:@h/", "https://u:***@h/"),
    ("POSTGRESQL://CI:PW@DB/X", "POSTGRESQL://CI:***@DB/X"),
    # nothing to mask: the user name alone, a flag without a value, no query
    ("https://user@h/", "https://user@h/"),
    ("https://h/?verbose", "https://h/?verbose"),
    ("https://h:8443/path/to", "https://h:8443/path/to"),
    ("local", "local"),
])
def test_url_masks_the_password_and_every_query_value(given: str, masked: str) -> None:
    assert redact.url(given) == masked


def test_in_text_finds_every_url_in_text() -> None:
    command = ("govsync apply --state=postgresql://ci:pw1@db/x?sslpassword=pw2 "
               "--endpoint https://k:pw3@api.example.com/ (see https://u:pw4@h/x) "
               "'https://h/?token=pw5'\nnext line: sqlite://tmp/state.db")
    assert redact.in_text(command) == (
        "govsync apply --state=postgresql://ci:***@db/x?sslpassword=*** "
        "--endpoint https://k:***@api.example.com/ (see https://u:***@h/x) "
        # what ends a query value is a space: the closing quote is masked with it
        "'https://h/?token=***\nnext line: sqlite://tmp/state.db")


@pytest.mark.parametrize("text", ["", "plain words", "user:password@host without a scheme",
                                  "a=1&b=2?c=3"])
def test_in_text_leaves_text_without_urls(text: str) -> None:
    assert redact.in_text(text) == text

"""An endpoint's identity (one spelling, no credentials) and the place it leads to
(issue 41, finding 1)."""

from __future__ import annotations

import socket

import pytest

from govsync import endpoints
from govsync.endpoints import THIS_MACHINE, Places


@pytest.mark.parametrize(("endpoint", "identity"), [
    # credentials, query, fragment and trailing slashes are not part of it
    ("  https://u:p@api.example.com/api/?token=1#x  ", "https://api.example.com/api"),
    ("https://sk_live_token@api.example.com/", "https://api.example.com"),
    ("https://api.example.com/a#frag", "https://api.example.com/a"),
    ("https://api.example.com/x@y", "https://api.example.com/x@y"),
    # case, default ports, trailing dots, dot segments, repeated slashes, escapes
    ("https://API.example.com//", "https://api.example.com"),
    ("HTTPS://Api.Example.COM.:443/", "https://api.example.com"),
    ("https://api.example.com/.", "https://api.example.com"),
    ("https://api.example.com/v1/../v2/./x//", "https://api.example.com/v2/x"),
    ("https://api.example.com/%7Ev1/%2e%2E/%2fx", "https://api.example.com/%2Fx"),
    ("http://127.0.0.1:8080/.", "http://127.0.0.1:8080"),
    ("http://localhost:80/api/../", "http://localhost"),
    ("http://127.0.0.1:080", "http://127.0.0.1"),
    # an address in its one form; a name as IDNA
    ("http://127.1:8080", "http://127.0.0.1:8080"),
    ("http://0x7f.0.0.1:8080", "http://127.0.0.1:8080"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080"),
    ("https://Bücher.example/", "https://xn--bcher-kva.example"),
    ("https://api.example.123/", "https://api.example.123"),
    # what reaches the host the client reaches: the last @ ends the user info
    ("http://127.0.0.1:8080\\@evil.example/", "http://evil.example"),
    ("http://evil.example\\@127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ("local", "local"),
    (" local/ ", "local"),
])
def test_identity_is_one_spelling_without_credentials(endpoint: str, identity: str) -> None:
    assert endpoints.identity(endpoint) == identity
    assert endpoints.identity(identity) == identity  # idempotent: recorded, then compared


def test_a_state_recorded_before_compares_equal_to_its_own_endpoint() -> None:
    """The identity recorded before this one kept the host's case and the default port;
    compared through identity on both sides, it is the same endpoint."""
    for recorded, configured in [("https://API.example.com", "https://API.example.com/"),
                                 ("https://api.example.com:443/v1", "https://api.example.com/v1"),
                                 ("http://127.0.0.1:8080", "http://127.0.0.1:8080/.")]:
        assert endpoints.same(recorded, configured)
    assert not endpoints.same("http://127.0.0.1:8080", "http://localhost:8080")
    assert not endpoints.same("http://127.0.0.1:8080", "http://127.0.0.1:8081")
    assert not endpoints.same("https://api.example.com/v1", "https://api.example.com/v2")
    assert not endpoints.same("https://api.example.com", None)


def test_a_name_and_its_address_are_one_place() -> None:
    places = Places(["http://localhost:8080", "http://127.0.0.1:8080/.", "http://[::1]:8080",
                     "http://0.0.0.0:8080", "http://127.0.0.1:9090", "local",
                     "http://localhost:8080/other"])
    assert places.same("http://localhost:8080", "http://127.0.0.1:8080/.")
    assert places.same("http://[::1]:8080", "http://127.0.0.1:8080/.")
    assert places.same("http://0.0.0.0:8080", "http://localhost:8080")
    assert places.same("http://localhost:8080/other", "http://localhost:8080")  # one server
    assert not places.same("http://127.0.0.1:9090", "http://localhost:8080")  # another port
    assert not places.same("local", "http://localhost:8080")
    assert places.same("local", "local")
    assert not places.same(None, "local")


def test_a_name_that_does_not_resolve_is_an_open_question_answered_yes() -> None:
    """A name that does not resolve (or not in time) may be any server on its port: the
    safe answer for governance is the same place; another port is another place."""
    places = Places(["https://nowhere.invalid", "https://203.0.113.9",
                     "http://nowhere.invalid:8080"], seconds=5)
    assert places.place("https://nowhere.invalid").addresses is None
    assert places.same("https://nowhere.invalid", "https://203.0.113.9")
    assert not places.same("http://nowhere.invalid:8080", "https://203.0.113.9")


def test_resolving_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resolver that never answers leaves the name unresolved after the deadline."""
    import threading

    never = threading.Event()
    real = socket.getaddrinfo

    def hangs(host: str, *args: object, **kw: object) -> object:
        if host == "slow.example":
            never.wait(30)
        return real(host, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", hangs)
    try:
        found = endpoints.resolve([("slow.example", 443), ("localhost", 443)], seconds=0.5)
    finally:
        never.set()
    assert ("slow.example", 443) not in found
    assert found[("localhost", 443)] == {THIS_MACHINE}

"""Credentials in URLs, masked for messages, records and logs: one place.

A URL may carry a password (``postgresql://ci:hunter2@db/govsync``), a
libpq ``password=`` parameter or a token in its query (``?token=...``).
Wherever govsync shows, logs or records a URL it passes through ``url``;
text that may hold URLs (a recorded command line) through ``in_text``.
"""

from __future__ import annotations

import re

MASK = "***"
# The patterns are compiled on first use (re's cache), not at every start-up (issue 31:
# the first one, case-insensitive, took 0.8 ms to compile).
# scheme://user:password@   (the password, up to the @ that ends the user info)
_USERINFO = r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@?#]*):[^\s@/?#]*@"
# ?name=value&name=value    (every query value: tokens, keys, password=...)
_QUERY_VALUE = r"([?&][^=&#\s]+=)[^&#\s]*"
# A query parameter that holds a credential (``passwords``).
_CREDENTIAL_NAME = r"(?i)pass|token|secret|key|auth|cred"


def url(text: str) -> str:
    """``text`` (a URL) with its password and every query value masked."""
    masked = re.sub(_USERINFO, rf"\1:{MASK}@", text)
    if "?" in masked:
        head, _, query = masked.partition("?")
        masked = head + re.sub(_QUERY_VALUE, rf"\1{MASK}", "?" + query)
    return masked


def in_text(text: str) -> str:
    """Every URL inside ``text`` masked as ``url`` masks one."""
    if "://" not in text:  # the common case, 50x cheaper than the search
        return text
    return re.sub(r"(?i)\b[a-z][a-z0-9+.\-]*://\S+", lambda m: url(m.group(0)), text)



def passwords(text: str) -> list[str]:
    """The credentials in ``text`` (a URL): its password, and the value of each query
    parameter that names one (``password``, ``sslpassword``, ``token``, ``secret``,
    ``key``...).  Not every value ``url`` masks: ``sslmode=require`` is no secret, and
    these are looked for in everything a server answers."""
    found = [m.group(0)[len(m.group(1)) + 1:-1] for m in re.finditer(_USERINFO, text)]
    if "?" in text:
        query = "?" + text.partition("?")[2].split("#", 1)[0]
        found += [m.group(0)[len(m.group(1)):] for m in re.finditer(_QUERY_VALUE, query)
                  if re.search(_CREDENTIAL_NAME, m.group(1))]
    return [p for p in found if p]

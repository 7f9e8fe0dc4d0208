"""What a name may hold, and which names only look alike.

A name reaches plans, pull-request comments and terminals: characters that
are invisible there or reorder the text around them (controls, C1 controls,
zero-width and bidirectional formatting characters, line and paragraph
separators) are refused, and two names of one kind that a reviewer cannot
tell apart (``payments`` and ``pаyments`` with a Cyrillic ``а``) are flagged.
"""

from __future__ import annotations

import unicodedata

# Cc controls (C0, DEL, C1), Cf formatting (bidi overrides, zero-width),
# Zl/Zp separators, Co private use, Cs surrogates, Cn unassigned.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})

# Letters that render like ASCII ones in common fonts (Cyrillic, Greek,
# Armenian...), by the ASCII letter they imitate.
_LOOKALIKES = {
    "a": "аɑα", "c": "сϲ", "d": "ԁ", "e": "еҽ", "h": "һ", "i": "іɩι", "j": "ј", "k": "κ",
    "l": "ӏℓ", "n": "ո", "o": "оοօ", "p": "рρ", "q": "ԛ", "s": "ѕ", "u": "υս", "v": "ν",
    "w": "ѡ", "x": "хχ", "y": "уγ", "0": "О", "1": "l",
}
_TO_ASCII = str.maketrans({c: ascii for ascii, chars in _LOOKALIKES.items() for c in chars})


def invisible(name: str) -> str | None:
    """A description of the first character ``name`` must not hold, or None."""
    for ch in name:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            label = unicodedata.name(ch, "") or "a control or formatting character"
            return f"U+{ord(ch):04X} ({label.lower()})"
    return None


def skeleton(name: str) -> str:
    """What ``name`` looks like: compatibility forms folded, look-alike letters as ASCII."""
    return unicodedata.normalize("NFKC", name).translate(_TO_ASCII)

"""Keys in bulk for the comparisons with other implementations."""

from __future__ import annotations

import random

from hypothesis import strategies as st

Key = str | bytes


class Text(str):
    """A str subclass: read through the checked path, as its str value."""


class Data(bytes):
    """A bytes subclass, likewise."""


#: Every kind of item a list of keys holds: ASCII text of every short length and beyond (read
#: in place), other text (through its UTF-8), bytes, subclasses of both, and None.
list_items = st.one_of(
    st.text(st.characters(max_codepoint=0x7F), max_size=70),
    st.text(max_size=40),
    st.binary(max_size=70),
    st.text(max_size=20).map(Text),
    st.binary(max_size=20).map(Data),
    st.none(),
)


def bulk_keys(seed: int, n: int) -> list[Key]:
    """``n`` keys from ``seed``: a third unicode text (any code point but surrogates, up to
    24 of them), a third arbitrary bytes (up to 48), the rest short ASCII names ending in
    numbers, with empty keys of both kinds among them."""
    rng = random.Random(seed)
    out: list[Key] = ["", b""]
    while len(out) < n:
        kind = rng.randrange(3)
        if kind == 0:
            chars = []
            for _ in range(rng.randrange(25)):
                c = rng.randrange(0x110000)
                while 0xD800 <= c <= 0xDFFF:
                    c = rng.randrange(0x110000)
                chars.append(chr(c))
            out.append("".join(chars))
        elif kind == 1:
            out.append(rng.randbytes(rng.randrange(49)))
        else:
            out.append(f"key-{rng.randrange(10 ** rng.randrange(1, 12))}")
    return out

"""Plain-text output of the command line: aligned tables, JSON and percentages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TextIO


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO) -> None:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def dump(data: object, out: TextIO) -> None:
    out.write(json.dumps(data, indent=2) + "\n")


def percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"

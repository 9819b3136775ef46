"""Pictures of a Key_Shared subscription as PNG files (matplotlib, ``keyshared[simulate]``).

:func:`plot_consumers`, the default, draws one bar per consumer: its share of the hash
space, and beside it the hashes it holds and waits for, its permits and unacked messages;
a consumer taking no messages is drawn red, one holding hashes that another waits for
orange, and one whose held hashes will not drain by themselves is marked so; the title is
the whole verdict. :func:`plot_ring` draws the hash ring: hashes 1 to 65535 clockwise
from the top, the broker's ranges one color per consumer, draining hashes marked outside it
in the color of their holder; with a what-if, an inner ring shows the ranges after it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from keyshared.errors import InvalidArgument
from keyshared.explain.answers import ConsumerShare, HeldHash
from keyshared.explain.explanation import Explanation
from keyshared.explain.stats import HASH_COUNT, shown

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.projections.polar import PolarAxes
    from matplotlib.typing import ColorType

#: Bar colors: a consumer taking messages, one taking none, and one taking messages while
#: holding hashes that another waits for (a holder that takes none is drawn as taking none).
TAKING_COLOR = "tab:blue"
STUCK_COLOR = "tab:red"
HOLDER_COLOR = "tab:orange"

#: Characters per line of the title: the verdict's lines are wrapped to the picture's width.
_TITLE_WIDTH = 120


@dataclass(frozen=True)
class ConsumerBar:
    """One consumer's bar: ``hash_share`` of the 65535 hashes (its length), the hashes it
    ``holds`` (draining on it) and ``waits_for`` (of its ranges, held by others), its
    permits and unacked messages; ``stuck`` when it takes no messages (drawn red);
    ``holder`` when the verdict names it as holding hashes that a consumer waits for (drawn
    orange unless stuck); ``never_drains`` when what it holds will not drain by itself.
    ``note`` is the text drawn beside the bar."""

    consumer: str
    hash_share: float
    holds: int
    waits_for: int
    available_permits: int
    unacked_messages: int
    stuck: bool
    holder: bool
    never_drains: bool
    note: str

    @property
    def color(self) -> str:
        """The bar's color: a holder that takes no messages is drawn as stuck, the graver
        of the two; its note still says what it holds."""
        if self.stuck:
            return STUCK_COLOR
        return HOLDER_COLOR if self.holder else TAKING_COLOR


def consumer_bars(explanation: Explanation) -> tuple[ConsumerBar, ...]:
    """The bars of :func:`plot_consumers`, in the stats' order, from ``explanation``."""
    verdict = explanation.verdict
    if verdict is None:
        raise InvalidArgument(
            "explanation.verdict is None: make it with explain_subscription",
            argument="explanation.verdict",
        )
    health = {h.consumer: h for h in verdict.consumers}
    holders = {w.holder for w in verdict.waits}
    bars = []
    for share in explanation.shares:
        h = health[share.consumer]
        note = (
            f"holds {h.holds} · waits for {h.waits_for} · permits {h.available_permits}"
            f" · unacked {h.unacked_messages}"
        )
        if not h.taking_messages:
            note += f" · TAKES NONE: {', '.join(h.reasons)}"
        if not h.will_drain:
            note += " · WILL NOT DRAIN"
        bars.append(
            ConsumerBar(
                consumer=share.consumer,
                hash_share=share.hash_share,
                holds=h.holds,
                waits_for=h.waits_for,
                available_permits=h.available_permits,
                unacked_messages=h.unacked_messages,
                stuck=not h.taking_messages,
                holder=share.consumer in holders,
                never_drains=not h.will_drain,
                note=note,
            )
        )
    return tuple(bars)


def consumer_figure(explanation: Explanation) -> tuple[Figure, tuple[ConsumerBar, ...]]:
    """The figure of :func:`plot_consumers` and the bars it draws (the caller closes it)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    bars = consumer_bars(explanation)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.55 * max(1, len(bars))))
    rows = np.arange(len(bars))
    ax.barh(rows, [100 * b.hash_share for b in bars], color=[b.color for b in bars], hatch=None)
    for row, bar in zip(rows.tolist(), bars, strict=True):
        ax.text(
            100 * bar.hash_share + 1,
            row,
            bar.note,
            va="center",
            fontsize="small",
            color=STUCK_COLOR if bar.stuck or bar.never_drains else "black",
        )
    ax.set_yticks(rows, [shown(b.consumer, 24) for b in bars])
    ax.invert_yaxis()
    ax.set_xlim(0, 200)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share of the 65535 sticky key hashes (%)")
    drawn = {b.color for b in bars}
    ax.legend(
        handles=[
            Patch(color=color, label=label)
            for color, label in (
                (TAKING_COLOR, "takes messages"),
                (HOLDER_COLOR, "holds hashes a consumer waits for"),
                (STUCK_COLOR, "takes no messages"),
            )
            if color in drawn
        ],
        # Beside the axes: inside, it would hide the notes of long bars.
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="small",
    )
    ax.set_title(_title(explanation), loc="left", fontsize="small")
    return fig, bars


def _title(explanation: Explanation) -> str:
    """The whole verdict, each line wrapped at spaces only: a name such as ``old-0`` is
    never split, and nothing is cut."""
    lines = explanation.verdict.lines if explanation.verdict else ()
    wrapped = [
        textwrap.fill(
            line,
            _TITLE_WIDTH,
            subsequent_indent="  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        for line in lines
    ]
    return "\n".join(wrapped) or f"subscription {shown(explanation.subscription)}"


def plot_consumers(explanation: Explanation, path: str | Path) -> tuple[ConsumerBar, ...]:
    """Writes the consumer picture of ``explanation`` to the PNG file ``path`` (making its
    folder); returns the bars it drew."""
    import matplotlib.pyplot as plt

    fig, bars = consumer_figure(explanation)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return bars


def plot_ring(explanation: Explanation, path: str | Path) -> None:
    """Writes the ring of ``explanation`` to the PNG file ``path``, making its folder."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    labels = [s.consumer for s in explanation.shares]
    after = explanation.what_if.shares_after if explanation.what_if else ()
    labels += [s.consumer for s in after if s.consumer not in labels]
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    colors = {label: palette(i % palette.N) for i, label in enumerate(labels)}
    fig = plt.figure(figsize=(8, 8))
    ax = cast("PolarAxes", fig.add_subplot(projection="polar"))
    ax.set_theta_zero_location("N")
    ax.set_theta_direction(-1)
    _ring(ax, explanation.shares, colors, radius=1.0)
    if explanation.what_if:
        _ring(ax, explanation.what_if.shares_after, colors, radius=0.6)
    _held(ax, explanation.held, colors)
    ax.set_ylim(0, 1.5)
    ax.set_yticks([])
    ax.set_xticks(np.linspace(0, 2 * np.pi, 8, endpoint=False))
    ax.set_xticklabels([f"{int(HASH_COUNT * i / 8) + 1}" for i in range(8)])
    handles: list[Artist] = [
        Rectangle(
            (0, 0), 1, 1, color=colors[s.consumer], label=f"{shown(s.consumer)} {s.hash_share:.1%}"
        )
        for s in explanation.shares
    ]
    if explanation.held:
        handles.append(
            Line2D(
                [],
                [],
                marker="v",
                linestyle="",
                color="black",
                label=f"draining ({len(explanation.held)})",
            )
        )
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    title = f"subscription {shown(explanation.subscription)}"
    if explanation.what_if:
        w = explanation.what_if
        title += (
            f"\ninner ring: if {shown(w.consumer)} {w.change}s ({w.moved_share:.1%} of hashes move)"
        )
    ax.set_title(title)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _angle(hash_: float) -> float:
    return 2 * np.pi * (hash_ - 1) / HASH_COUNT


def _ring(
    ax: PolarAxes, shares: tuple[ConsumerShare, ...], colors: Mapping[str, ColorType], radius: float
) -> None:
    for share in shares:
        for start, end in share.ranges:
            ax.bar(
                _angle(start),
                0.28,
                width=_angle(end + 1) - _angle(start),
                bottom=radius - 0.3,
                color=colors[share.consumer],
                align="edge",
                linewidth=0,
            )


def _held(ax: PolarAxes, held: tuple[HeldHash, ...], colors: Mapping[str, ColorType]) -> None:
    for h in held:
        ax.plot(
            [_angle(h.hash + 0.5)],
            [1.1],
            marker="v",
            markersize=6,
            color=colors[h.held_by],
            linestyle="",
        )


__all__ = [
    "HOLDER_COLOR",
    "STUCK_COLOR",
    "TAKING_COLOR",
    "ConsumerBar",
    "consumer_bars",
    "consumer_figure",
    "plot_consumers",
    "plot_ring",
]

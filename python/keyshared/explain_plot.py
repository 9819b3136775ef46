"""The hash ring of a Key_Shared subscription as a PNG (matplotlib, ``keyshared[simulate]``).

Hashes 1 to 65535 run clockwise from the top. The outer ring is the broker's ranges, one
color per consumer; draining hashes are marked outside it in the color of the consumer
holding them; with a what-if, an inner ring shows the ranges after the change.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from keyshared.explain import HASH_COUNT, ConsumerShare, Explanation, HeldHash

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.projections.polar import PolarAxes
    from matplotlib.typing import ColorType


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
        Rectangle((0, 0), 1, 1, color=colors[s.consumer], label=f"{s.consumer} {s.hash_share:.1%}")
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
    title = f"subscription {explanation.subscription}"
    if explanation.what_if:
        w = explanation.what_if
        title += f"\ninner ring: if {w.consumer} {w.change}s ({w.moved_share:.1%} of hashes move)"
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

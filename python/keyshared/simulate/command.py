"""``keyshared simulate``: run a built-in scenario or a TOML / JSON scenario file, print the
summary, write ``summary.json`` and the plots, and show progress on stderr.

Exit status: 0 when the run held every invariant, 1 on a violation (its event trail goes to
stderr), 2 on bad input.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import TextIO

from keyshared import _flags
from keyshared.errors import InvalidArgument
from keyshared.simulate.builtin import BUILTIN, builtin_scenario
from keyshared.simulate.engine import simulate
from keyshared.simulate.invariants import InvariantViolation
from keyshared.simulate.report import render_text, summarize, write_outputs
from keyshared.simulate.scenario import Scenario

EXIT_VIOLATION = 1


class ProgressBar:
    """A one-line bar on a terminal: virtual time against the run's horizon (a run that
    drains earlier jumps to the end), redrawn at most every ``every_s`` seconds of wall time,
    so it never slows a run down, and never changes one."""

    def __init__(self, stream: TextIO, label: str, width: int = 30, every_s: float = 0.1) -> None:
        self._stream = stream
        self._label = label
        self._width = width
        self._every_s = every_s
        self._last = 0.0
        self._started = time.monotonic()

    def __call__(self, now_ms: int, horizon_ms: int) -> None:
        wall = time.monotonic()
        if wall - self._last >= self._every_s:
            self._last = wall
            self._draw(min(1.0, now_ms / horizon_ms), now_ms, wall)

    def _draw(self, done: float, now_ms: int, wall: float) -> None:
        filled = int(done * self._width)
        self._stream.write(
            f"\r{self._label} [{'#' * filled}{'.' * (self._width - filled)}]"
            f" {now_ms / 1000:8.1f} s virtual, {wall - self._started:6.1f} s wall"
        )
        self._stream.flush()

    def close(self, end_ms: int | None) -> None:
        """Ends the line; with ``end_ms`` (the run finished), the bar full."""
        if end_ms is not None:
            self._draw(1.0, end_ms, time.monotonic())
        self._stream.write("\n")
        self._stream.flush()


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", nargs="?", metavar="SCENARIO", help="scenario file (.toml or .json)"
    )
    parser.add_argument(
        "--scenario", choices=sorted(BUILTIN), help="run a built-in scenario instead of a file"
    )
    parser.add_argument(
        "--scale", type=float, default=None, help="shrink or grow a built-in scenario (1)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed (default: the scenario's)")
    parser.add_argument(
        "--out", default="out/simulate", metavar="DIR", help="output directory (out/simulate)"
    )
    parser.add_argument("--no-plots", action="store_true", help="write summary.json only")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def _scenario(args: argparse.Namespace) -> Scenario:
    if (args.path is None) == (args.scenario is None):
        raise InvalidArgument(
            "give a SCENARIO file or --scenario NAME (one of them)", argument=None
        )
    _flags.check_positive("--scale", args.scale)
    if args.scenario is None:
        if args.scale is not None:
            raise InvalidArgument("--scale applies to built-in scenarios only", argument="--scale")
        return Scenario.from_file(args.path)
    return builtin_scenario(args.scenario, 1.0 if args.scale is None else args.scale)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.seed is not None and args.seed < 0:
        raise InvalidArgument(f"--seed must not be negative, got {args.seed}", argument="--seed")
    scenario = _scenario(args)
    # A folder that cannot be written fails now, not after a run of minutes.
    _flags.check_output_dir("--out", args.out)
    if not args.no_plots and importlib.util.find_spec("matplotlib") is None:
        # Said before the run rather than after it.
        raise InvalidArgument(
            "the plots need matplotlib: install keyshared[simulate], or pass --no-plots",
            argument=None,
        )
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = ProgressBar(sys.stderr, scenario.name) if show else None
    started = time.perf_counter()
    try:
        result = simulate(scenario, seed=args.seed, progress=bar)
    except InvariantViolation as violation:
        if bar is not None:
            bar.close(None)
        print(violation.report(), file=sys.stderr)
        return EXIT_VIOLATION
    wall = time.perf_counter() - started
    if bar is not None:
        bar.close(result.end_ms)
    scale = args.scale if args.scenario is not None else None
    summary = summarize(result, scale=1.0 if args.scenario and scale is None else scale)
    out.write(render_text(summary))
    processed = summary["messages"]["processed"]
    out.write(f"wall time {wall:.2f} s: {processed / wall:,.0f} simulated messages per second\n")
    for path in write_outputs(summary, Path(args.out), plots=not args.no_plots):
        out.write(f"wrote {path}\n")
    return 0


__all__ = ["EXIT_VIOLATION", "ProgressBar", "configure", "run"]

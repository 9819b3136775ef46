"""Every ``keyshared`` command of the documentation's ``sh`` blocks (README.md and docs/) that
needs no running broker, run as a user who installed the wheel runs it: the environment's own
``keyshared`` (the wheel's console script, beside this interpreter), from an empty folder
outside the clone holding copies of only the files that command names (``docs/examples/...``).
Each must exit 0, or with the status its page documents. The commands that need a broker are
named below one by one, and the number of commands run is pinned, so that a command added to a
page is run here or named as a broker's, never left out.

tests/package/test_docs.py runs the same commands with the development install. Its block
parser is not imported: importing that module builds its parametrization at import time
(``pytest.mark.pulsar``, which this suite's ``--strict-markers`` refuses, as it has no such
marker) and reads the dev suite's assumptions with it; a markdown fence is simple enough to
read again here.
"""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: The commands that reach a cluster, each by its line on the page: the smoke environment has
#: no broker (the dev suite runs them against its standalone one, tests/package/test_docs.py).
NEEDS_A_BROKER = {
    "keyshared verify --service-url pulsar://127.0.0.1:6650 --admin-url http://127.0.0.1:8080"
    " --scenario all",
    "keyshared verify --service-url pulsar://127.0.0.1:6650 --admin-url http://127.0.0.1:8080"
    " --scenario join --allow-out-of-order --report verify-report",
}

#: The flags that name a cluster: a command with one of them is a broker's.
CLUSTER_FLAGS = {"--service-url", "--admin-url", "--url", "--client-conf"}

#: How many broker-free ``keyshared`` commands the pages hold (a pipe ``a | b`` is one). A
#: page that adds one changes this count: run it here first (or name it in NEEDS_A_BROKER).
RUNNABLE = 28

#: A non-zero exit status a page documents, by the flag that asks for it.
DOCUMENTED_STATUS = {"--allow-out-of-order": 1}

#: Flags whose value is a file or folder the command writes, not one it reads.
WRITES = {"--png", "--out", "--report", "--save"}

TIMEOUT_S = 600


def sh_lines(page: Path) -> list[tuple[int, str]]:
    """The lines of ``page``'s ``sh`` fences, by line number (a ``\\`` continuation joined)."""
    found: list[tuple[int, str]] = []
    inside, pending, start = False, "", 0
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if not inside:
            inside = line.startswith("```sh")
            continue
        if line == "```":
            inside = False
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        found.append((start, pending + line))
        pending = ""
    return found


def docs_commands() -> list[tuple[str, list[str]]]:
    """Every ``keyshared`` command of the pages' sh blocks: where it is, and its words."""
    out = []
    for page in PAGES:
        for number, line in sh_lines(page):
            words = shlex.split(line, comments=True)
            if words and words[0] == "keyshared":
                out.append((f"{page.relative_to(ROOT)}:{number}", words))
    return out


COMMANDS = docs_commands()
BROKER = [(where, words) for where, words in COMMANDS if CLUSTER_FLAGS & set(words)]
RUNS = [(where, words) for where, words in COMMANDS if not CLUSTER_FLAGS & set(words)]


def test_every_command_of_the_docs_is_run_or_named_as_a_broker_s() -> None:
    assert {" ".join(words) for _, words in BROKER} == NEEDS_A_BROKER
    assert len(RUNS) == RUNNABLE, (
        f"the docs hold {len(RUNS)} keyshared commands that need no broker, this test"
        f" pins {RUNNABLE}: check that each runs here, then update RUNNABLE"
    )


def keyshared() -> Path:
    """The environment's ``keyshared``: the wheel's (scripts/wheels.sh runs this suite with
    the interpreter of the environment the wheel was installed into)."""
    program = Path(sys.executable).parent / "keyshared"
    assert program.is_file(), f"no keyshared beside {sys.executable}"
    return program


def files_named(words: list[str]) -> list[str]:
    """The files of the repository that ``words`` name by their path from its root."""
    return [
        word
        for before, word in zip(["", *words], words, strict=False)
        if before not in WRITES and "/" in word and (ROOT / word).is_file()
    ]


@pytest.mark.parametrize(
    "words", [w for _, w in RUNS], ids=[f"{where}: {' '.join(w)}" for where, w in RUNS]
)
def test_the_command_runs_with_the_installed_keyshared(words: list[str], tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT)
    for name in files_named(words):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    status = max((DOCUMENTED_STATUS.get(w, 0) for w in words), default=0)
    given: str | None = None
    rest = words
    while rest:
        end = rest.index("|") if "|" in rest else len(rest)
        part, rest = rest[:end], rest[end + 1 :]
        assert part[0] == "keyshared", f"{part[0]!r} in a pipe of keyshared commands"
        done = subprocess.run(
            [str(keyshared()), *part[1:]],
            cwd=tmp_path,
            input=given,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        want = status if not rest else 0
        assert done.returncode == want, f"{' '.join(part)}: {done.stderr[-2000:]}"
        given = done.stdout

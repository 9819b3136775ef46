"""Every code block of the README, checked by this one runner, as written.

- ``python`` blocks run in a fresh namespace from the repository root (their ``assert`` lines
  are the checks);
- ``toml`` blocks are simulator scenarios and must read as one;
- ``sh`` blocks run command by command in a scratch folder that holds what their prose names
  (``snapshot.json``, ``my-scenario.toml``, the recorded ``tests/fixtures``): ``keyshared``
  commands and ``scripts/pulsar.sh`` run and must succeed, a ``pytest`` command is collected
  only (running it would run this suite inside itself), and the scripts that are whole jobs
  (``scripts/test.sh`` is this suite, ``scripts/run.sh`` the Spark job, ``scripts/bench.sh``
  the benchmarks) must exist and be executable.

The blocks of the Spark chapter need a Spark session or a cluster: tests/spark/test_spark_jvm.py
runs its Python and SQL blocks on one, tests/spark/test_spark_cluster.py its cluster recipe.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

import keyshared as ks
from keyshared.simulate import Scenario

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SPARK_CHAPTER = "Spark"
WHOLE_JOBS = {"scripts/test.sh", "scripts/run.sh", "scripts/bench.sh"}
TIMEOUT_S = 1800


@dataclass(frozen=True)
class Block:
    chapter: str  # the ``##`` heading it sits under
    section: str  # its nearest heading
    language: str
    code: str
    line: int

    def __str__(self) -> str:
        return f"{self.section}:{self.line}:{self.language}"


def readme_blocks() -> list[Block]:
    blocks: list[Block] = []
    chapter = section = ""
    fence: str | None = None
    start, lines = 0, []
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if fence is None and line.startswith("#"):
            section = line.lstrip("# ")
            chapter = section if line.startswith("## ") else chapter
        elif fence is None and line.startswith("```"):
            fence, start, lines = line[3:], number, []
        elif fence is not None and line == "```":
            blocks.append(Block(chapter, section, fence, "\n".join(lines), start))
            fence = None
        elif fence is not None:
            lines.append(line)
    return [b for b in blocks if b.chapter != SPARK_CHAPTER]


BLOCKS = readme_blocks()


def blocks_in(language: str) -> list[Block]:
    return [b for b in BLOCKS if b.language == language]


def test_every_block_is_checked() -> None:
    assert {b.language for b in BLOCKS} == {"python", "toml", "sh"}


@pytest.mark.parametrize("block", blocks_in("python"), ids=str)
def test_python_block_runs(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(block.code, f"README.md:{block.line}", "exec"), {})


@pytest.mark.parametrize("block", blocks_in("toml"), ids=str)
def test_toml_block_is_a_scenario(block: Block) -> None:
    scenario = Scenario.from_dict(tomllib.loads(block.code))
    assert scenario.topics


def commands() -> list[object]:
    """Each command of the sh blocks, those needing Pulsar's jars marked so."""
    out: list[object] = []
    for block in blocks_in("sh"):
        for line in block.code.splitlines():
            command = shlex.split(line, comments=True)
            if not command:
                continue
            marks = [pytest.mark.pulsar] if "pulsar" in line else []
            out.append(pytest.param(command, marks=marks, id=f"{block.line}:{' '.join(command)}"))
    return out


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder holding what the sh blocks' prose names, the recorded fixtures included."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    snapshot = {
        "layout": ks.TopicLayout.initial(2).to_dict(),
        "load_by_segment": {"0": {"msg_rate_in": 20_000.0, "modified_at_ms": 0}},
        "stream_consumer_count_by_sub": {"orders": 1},
        "now_ms": 60_000,
    }
    (tmp_path / "snapshot.json").write_text(json.dumps(snapshot), encoding="utf-8")
    (scenario,) = blocks_in("toml")
    (tmp_path / "my-scenario.toml").write_text(scenario.code, encoding="utf-8")
    return tmp_path


def executable(name: str) -> str:
    """An executable of the environment running the tests (``keyshared``, ``python``)."""
    return shutil.which(name) or str(Path(sys.executable).parent / name)


@pytest.mark.parametrize("command", commands())
def test_sh_command_runs(command: list[str], scratch: Path) -> None:
    program = command[0]
    if program in WHOLE_JOBS:
        assert os.access(ROOT / program, os.X_OK), program
        return
    if program.startswith("scripts/"):
        run([str(ROOT / program), *command[1:]], ROOT)
    elif program == ".venv/bin/python" and command[1:3] == ["-m", "pytest"]:
        done = run([sys.executable, *command[1:], "--collect-only"], ROOT)
        assert " tests collected" in done.stdout or " tests selected" in done.stdout
    else:
        assert program == "keyshared", f"no rule to run {program!r} from the README"
        assert run([executable("keyshared"), *command[1:]], scratch).stdout


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
    return done

"""Every code block of the README and of the documentation site (docs/), checked by this one
runner, as written; and the site itself, built with warnings as errors, with every public
name in its API reference.

- ``python`` blocks run in a fresh namespace from the repository root (their ``assert`` lines
  are the checks);
- ``toml`` blocks are simulator scenarios and must read as one;
- ``sh`` blocks run command by command in a scratch folder that holds what their prose names
  (``snapshot.json``, ``my-scenario.toml``, the recorded ``tests/fixtures``): ``keyshared``
  commands and ``scripts/pulsar.sh`` run and must succeed, a ``pytest`` command is collected
  only (running it would run this suite inside itself), and the scripts that are whole jobs
  (``scripts/test.sh`` is this suite, ``scripts/run.sh`` the Spark job, ``scripts/bench.sh``
  the benchmarks, ``scripts/wheels.sh`` the wheels, which the suite's last step builds) must
  exist and be executable.

The blocks of the Spark guide need a Spark session or a cluster: tests/spark/test_spark_jvm.py
runs its Python and SQL blocks on one, tests/spark/test_spark_cluster.py its cluster recipe.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import keyshared as ks
from keyshared.simulate import Scenario

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SPARK_GUIDE = DOCS / "guides" / "spark.md"
PAGES = [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if p != SPARK_GUIDE)]
WHOLE_JOBS = {"scripts/test.sh", "scripts/run.sh", "scripts/bench.sh", "scripts/wheels.sh"}
TIMEOUT_S = 1800


@dataclass(frozen=True)
class Block:
    page: str  # the page's path from the repository root
    section: str  # its nearest heading
    language: str
    code: str
    line: int

    def __str__(self) -> str:
        return f"{self.page}:{self.line}:{self.language}"


def page_blocks(page: Path) -> list[Block]:
    blocks: list[Block] = []
    section = ""
    fence: str | None = None
    start, lines = 0, []
    name = page.relative_to(ROOT).as_posix()
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if fence is None and line.startswith("#"):
            section = line.lstrip("# ")
        elif fence is None and line.startswith("```"):
            fence, start, lines = line[3:], number, []
        elif fence is not None and line == "```":
            blocks.append(Block(name, section, fence, "\n".join(lines), start))
            fence = None
        elif fence is not None:
            lines.append(line)
    return blocks


BLOCKS = [block for page in PAGES for block in page_blocks(page)]


def blocks_in(language: str) -> list[Block]:
    return [b for b in BLOCKS if b.language == language]


def test_every_block_is_checked() -> None:
    assert {b.language for b in BLOCKS} == {"python", "toml", "sh"}


@pytest.mark.parametrize("block", blocks_in("python"), ids=str)
def test_python_block_runs(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(block.code, f"{block.page}:{block.line}", "exec"), {})


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
            out.append(pytest.param(command, marks=marks, id=f"{block}:{' '.join(command)}"))
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


#: The addresses the docs give a standalone broker, and the verify runs expected to fail.
DOCS_SERVICE_URL, DOCS_ADMIN_URL = "pulsar://127.0.0.1:6650", "http://127.0.0.1:8080"
FAILS_ON_PURPOSE = "--allow-out-of-order"


def on_the_test_broker(command: list[str], request: pytest.FixtureRequest) -> list[str]:
    """A command that names the docs' broker, pointed at the suite's standalone broker."""
    if DOCS_SERVICE_URL not in command:
        return command
    broker = request.getfixturevalue("pulsar_broker")
    swap = {DOCS_SERVICE_URL: broker.service_url, DOCS_ADMIN_URL: broker.web_url}
    return [swap.get(word, word) for word in command]


@pytest.mark.parametrize("command", commands())
def test_sh_command_runs(command: list[str], scratch: Path, request: pytest.FixtureRequest) -> None:
    command = on_the_test_broker(command, request)
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
        assert program == "keyshared", f"no rule to run {program!r} from the docs"
        status = 1 if FAILS_ON_PURPOSE in command else 0
        assert run([executable("keyshared"), *command[1:]], scratch, status).stdout


def run(command: list[str], cwd: Path, status: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == status, f"{command}: {done.stderr[-2000:]}"
    return done


def test_the_readme_is_a_front_page() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 250


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as scripts/test.sh builds it: warnings are errors (mkdocs.yml)."""
    out = tmp_path_factory.mktemp("site")
    mkdocs = executable("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


REFERENCE = sorted((DOCS / "reference").glob("*.md"))


@pytest.mark.parametrize("page", [p for p in REFERENCE if p.stem != "index"], ids=lambda p: p.stem)
def test_every_public_name_is_in_the_reference(page: Path, site: Path) -> None:
    (module_name,) = re.findall(r"^::: (\S+)$", page.read_text(encoding="utf-8"), re.M)
    module = importlib.import_module(module_name)
    html = (site / "reference" / page.stem / "index.html").read_text(encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    # A subpackage has its own page; a dunder (``__version__``) is named in the page's text.
    missing = [
        n
        for n in module.__all__
        if not isinstance(getattr(module, n), ModuleType)
        and f'id="{module_name}.{n}"' not in html
        and not (n.startswith("__") and f"`{module_name}.{n}`" in text)
    ]
    assert not missing, f"{module_name}: not in the API reference: {missing}"


def test_every_module_of_the_package_has_a_reference_page() -> None:
    documented = {
        re.findall(r"^::: (\S+)$", p.read_text(encoding="utf-8"), re.M)[0]
        for p in REFERENCE
        if p.stem != "index"
    }
    packages = {"keyshared"} | {
        f"keyshared.{p.name}"
        for p in (ROOT / "python" / "keyshared").iterdir()
        if (p / "__init__.py").exists()
    }
    assert packages <= documented

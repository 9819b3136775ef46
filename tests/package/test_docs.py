"""Every code block of the README and of the documentation site (docs/), checked by this one
runner, as written; and the site itself, built with warnings as errors, with every public
name in its API reference.

- ``python`` blocks run in a fresh namespace from the repository root (their ``assert`` lines
  are the checks);
- ``toml`` blocks are simulator scenarios and must read as one;
- ``sh`` blocks run command by command (``a | b`` as a pipe) in an empty folder outside the
  clone, holding only copies of the files the commands name (``docs/examples/...``), with the
  installed ``keyshared``: ``keyshared`` commands and ``scripts/pulsar.sh`` run and must
  succeed, a ``pytest`` command is collected only (running it would run this suite inside
  itself), and the scripts that are whole jobs (``scripts/test.sh`` is this suite,
  ``scripts/run.sh`` the Spark job, ``scripts/bench.sh`` the benchmarks, ``scripts/wheels.sh``
  the wheels, which the suite's last step builds) must exist and be executable. Every file a
  command reads exists in the repository. tests/smoke/test_docs_commands.py runs the
  ``keyshared`` commands that need no broker again with each wheel (scripts/wheels.sh);
- an indented block starting ``$ keyshared ...`` quotes that command's first lines of output
  (``(...)`` standing for what the page leaves out), and must match them;
- figures cannot drift: every speed ratio a page states (``14x``) is one that
  docs/benchmarks.md, the page of the last whole ``scripts/bench.sh`` run, states, and
  README's Speed table holds only its numbers; docs/pulsar.md's total of cases is the sum of
  its rows.

The blocks of the Spark guide need a Spark session or a cluster: tests/spark/test_spark_jvm.py
runs its Python and SQL blocks on one, tests/spark/test_spark_cluster.py its cluster recipe.
"""

from __future__ import annotations

import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

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
    assert {b.language for b in BLOCKS} == {"python", "toml", "sh", "rust"}


#: Rust that cargo compiles: the kernels' examples (between their ``// [docs]`` lines) and
#: the crate README's blocks (doctests).
KERNELS = ROOT / "rust" / "kernels"


def compiled_rust() -> list[str]:
    quoted = []
    for example in sorted((KERNELS / "examples").glob("*.rs")):
        parts = example.read_text(encoding="utf-8").split("    // [docs]\n")
        quoted += [textwrap.dedent(part) for part in parts[1::2]]
    readme = (KERNELS / "README.md").read_text(encoding="utf-8")
    quoted += [part.split("```", 1)[0] for part in readme.split("```rust\n")[1:]]
    return quoted


@pytest.mark.parametrize("block", blocks_in("rust"), ids=str)
def test_rust_block_is_compiled_code(block: Block) -> None:
    assert block.code + "\n" in compiled_rust(), "quote an example's [docs] part or the README"


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


#: Flags whose value is a file or folder a command writes, not one it reads.
WRITES = {"--png", "--out", "--report", "--save"}

#: A word that names a file by its path from the repository root.
RELATIVE_FILE = re.compile(r"^[\w.-]+(/[\w.-]+)*\.(json|toml|txt|csv|parquet)$")


def files_read(command: list[str]) -> list[str]:
    """The files ``command`` reads, by their paths from the repository root."""
    return [
        word
        for before, word in zip(["", *command], command, strict=False)
        if before not in WRITES and RELATIVE_FILE.match(word)
    ]


def test_every_file_a_command_reads_is_in_the_repository() -> None:
    missing = [
        f"{block}: {name}"
        for block in blocks_in("sh")
        for line in block.code.splitlines()
        for name in files_read(shlex.split(line, comments=True))
        if not (ROOT / name).is_file()
    ]
    assert not missing


def test_the_example_scenario_is_the_page_s() -> None:
    (scenario,) = blocks_in("toml")
    written = (DOCS / "examples" / "my-scenario.toml").read_text(encoding="utf-8")
    assert written == scenario.code + "\n"


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """An empty folder outside the clone, with copies of the files the commands read."""
    assert not tmp_path.is_relative_to(ROOT)
    for block in blocks_in("sh"):
        for line in block.code.splitlines():
            for name in files_read(shlex.split(line, comments=True)):
                if (ROOT / name).is_file():
                    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(ROOT / name, tmp_path / name)
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
        assert pipeline(command, scratch, status)


def pipeline(command: list[str], cwd: Path, status: int = 0) -> str:
    """What ``command`` prints, each ``keyshared`` of a ``a | b`` pipe fed the one before."""
    given: str | None = None
    while command:
        end = command.index("|") if "|" in command else len(command)
        part, command = command[:end], command[end + 1 :]
        assert part[0] == "keyshared", f"no rule to run {part[0]!r} from the docs"
        done = subprocess.run(
            [executable("keyshared"), *part[1:]],
            cwd=cwd,
            input=given,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        assert done.returncode == (status if not command else 0), f"{part}: {done.stderr[-2000:]}"
        given = done.stdout
    return given or ""


def quoted_outputs() -> list[object]:
    """Each indented ``$ keyshared ...`` block of a page: the command and the lines quoted."""
    found: list[object] = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if line.startswith("    $ keyshared "):
                quoted = []
                for after in lines[number:]:
                    if not after.startswith("    "):
                        break
                    quoted.append(after[4:])
                name = f"{page.relative_to(ROOT)}:{number}"
                found.append(pytest.param(shlex.split(line[6:]), quoted, id=name))
    return found


@pytest.mark.parametrize(("command", "quoted"), quoted_outputs())
def test_quoted_output_is_the_command_s(
    command: list[str], quoted: list[str], scratch: Path
) -> None:
    shown = pipeline(command, scratch).splitlines()
    assert len(shown) >= len(quoted)
    for said, printed in zip(quoted, shown, strict=False):
        pattern = ".*".join(map(re.escape, said.split("(...)")))
        assert re.fullmatch(pattern, printed), f"quoted {said!r}, printed {printed!r}"


BENCHMARKS = (DOCS / "benchmarks.md").read_text(encoding="utf-8")

#: A ratio (``14x``, ``2.7x``) or a range of them (``5.9-9.5x``); not ``4.x``.
RATIO = re.compile(r"(?<![\w.:])(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?x\b")


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "benchmarks.md"], ids=str)
def test_every_ratio_a_page_states_is_the_benchmark_run_s(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    stated = {n for m in RATIO.finditer(text) for n in m.groups() if n}
    assert not [n for n in stated if f"{n}x" not in BENCHMARKS]


def test_the_readme_speed_table_is_the_benchmark_run_s() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Speed") : readme.index("## Versions")]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert rows
    numbers = {
        n
        for row in rows
        for cell in row.strip("|").split("|")[2:]
        for n in re.findall(r"\d+(?:\.\d+)?", cell)
    }
    missing = [n for n in numbers if not re.search(rf"(?<![\d.]){re.escape(n)}(?!\d)", BENCHMARKS)]
    assert not missing, f"README's Speed states {missing}, which docs/benchmarks.md does not"


def amount(text: str) -> float:
    """``2.8M`` or ``114k`` as a number."""
    return float(text[:-1]) * {"k": 1e3, "M": 1e6}[text[-1]]


def test_the_oracle_s_total_is_the_sum_of_its_rows() -> None:
    page = (DOCS / "pulsar.md").read_text(encoding="utf-8")
    start = page.index("| area | 4.2.4 | 4.0.7 | 5.0.0-M1 | differences |")
    table = page[start : page.index("\n\n", start)].splitlines()[2:]
    rows = sum(
        amount(cell.strip())
        for row in table
        for cell in row.strip("|").split("|")[1:4]
        if cell.strip()
    )
    others = page[page.index("The other systems' jars") :]
    others, total = others.split(" cases in all", 1)[0].rsplit("\n", 1)
    peers = sum(amount(n) for n in re.findall(r"\b(\d+(?:\.\d+)?[kM])\b", others))
    assert f"{(rows + peers) / 1e6:.1f}M" == total


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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_is_to_a_file_in_the_repository(page: Path) -> None:
    """mkdocs checks the site's links; this checks README's too, and links out of docs/."""
    text = page.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    missing = [
        link
        for link in links
        if not re.match(r"^[a-z]+:", link) and not (page.parent / link).exists()
    ]
    assert not missing

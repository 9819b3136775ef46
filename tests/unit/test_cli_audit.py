"""``keyshared audit``: the library's audit of keys from arguments, a file or stdin."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keyshared import TopicLayout, cli, create_migrated_metadata
from keyshared.routing import HashingScheme
from keyshared.scalable import audit_migration

FIXTURES = Path(__file__).parents[1] / "fixtures" / "audit"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli.main(list(argv), out=out)
    return status, out.getvalue()


def test_json_is_the_librarys_audit_of_a_counted_key_file() -> None:
    status, text = run(
        "audit", "--keys", str(FIXTURES / "keys.csv"), "--from", "kafka", "--partitions", "6",
        "--to-partitions", "8", "--json",
    )  # fmt: skip
    assert status == 0
    rows = [line.split(",") for line in (FIXTURES / "keys.csv").read_text().splitlines()[1:]]
    want = audit_migration([k for k, _ in rows], "kafka", 6, 8, weights=[int(c) for _, c in rows])
    assert json.loads(text) == want.to_dict()


def test_a_layout_file_and_the_text_table(tmp_path: Path) -> None:
    layout = create_migrated_metadata(
        "persistent://t/n/x", 4, hashing_scheme=HashingScheme.JavaStringHash
    )
    path = tmp_path / "layout.json"
    path.write_text(layout.to_json())
    keys = [f"order-{i}" for i in range(40)]
    status, text = run(
        "audit", *keys, "--from", "pulsar:Murmur3_32Hash", "--partitions", "4",
        "--to-layout", str(path),
    )  # fmt: skip
    assert status == 0
    audit = audit_migration(keys, "pulsar:Murmur3_32Hash", 4, layout)
    lines = text.splitlines()
    assert (
        lines[0]
        == "40 key(s), 40 message(s): 4 partition(s) by pulsar:Murmur3_32Hash -> 4 segments"
    )
    header = lines[2].split()
    assert header == ["partition", "keys", "messages", *audit.target_labels]
    for p, line in enumerate(lines[3:7]):
        cells = line.split()
        assert int(cells[1]) == audit.keys[p].sum()
        shown = [float(c.rstrip("%")) / 100 for c in cells[3:]]
        assert np.allclose(shown, audit.traffic_shares[p], atol=0.0006)
    assert f"order at risk: {audit.at_risk_keys} key(s)" in text
    assert audit.at_risk_keys > 0 and "heaviest at risk: " in text


def test_stdin_keys_add_up_with_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\ufeffa\nb\na\n"))
    status, text = run(
        "audit", "a", "--stdin", "--from", "kafka", "--partitions", "3", "--to-partitions", "5",
        "--json",
    )  # fmt: skip
    assert status == 0
    assert json.loads(text) == audit_migration(["a", "b"], "kafka", 3, 5, weights=[3, 1]).to_dict()


def test_unkeyed_keys_are_reported_apart() -> None:
    status, text = run(
        "audit", "", "x", "--from", "librdkafka:consistent_random", "--partitions", "2",
        "--to-partitions", "3",
    )  # fmt: skip
    assert status == 0
    assert "unkeyed (no fixed partition, not in the table): 1 key(s), 1 message(s)" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "kafka", "--partitions", "2", "--to-partitions", "3"], "no keys given"),
        (["k", "--from", "nope", "--partitions", "2", "--to-partitions", "3"], "--from must be"),
        (
            ["k", "--from", "kafka", "--partitions", "0", "--to-partitions", "3"],
            "--partitions must be",
        ),
        (
            ["k", "--from", "kafka", "--partitions", "2", "--to-partitions", "0"],
            "--to-partitions must be",
        ),
        (["k", "--from", "kafka", "--partitions", "2", "--to-layout", "nope.json"], "nope.json"),
        (["--stdin", "--from", "kafka", "--partitions", "2", "--to-layout", "-"], "both read"),
        (
            ["k", "--from", "kafka", "--partitions", "2", "--to-partitions", "3", "--sample", "-1"],
            "--sample must be",
        ),
        (
            ["k", "--from", "kafka", "--partitions", "100000", "--to-partitions", "100000"],
            "= 10,000,000,000 cells, beyond the audit's limit of 16,777,216",
        ),
        (
            ["k", "--from", "kafka", "--partitions", "4", "--to-partitions", str(2**31)],
            "--to-partitions must be <= 2147483647",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("audit", *argv)[0] == 2
    err = capsys.readouterr().err
    assert err.startswith("keyshared audit: error: ") and message in err


def test_stdin_closed_entirely_exits_2_saying_where_keys_go() -> None:
    # With file descriptor 0 closed the interpreter has no sys.stdin at all (None), which an
    # empty stdin (/dev/null) does not show.
    done = subprocess.run(
        [sys.executable, "-m", "keyshared", "audit", "--stdin", "--from", "kafka",
         "--partitions", "4", "--to-partitions", "8"],
        preexec_fn=lambda: os.close(0),
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "keyshared audit: error: --stdin: standard input is closed, where keys were expected"
        " one a line; give KEY arguments or --keys FILE\n"
    )


def test_a_target_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["audit", "k", "--from", "kafka", "--partitions", "2"])
    assert exc.value.code == 2
    assert "--to-layout" in capsys.readouterr().err


def test_the_readme_layout_fixture_is_a_migrated_layout() -> None:
    layout = TopicLayout.from_json((FIXTURES / "migrated-12.json").read_text())
    assert layout == create_migrated_metadata(
        "persistent://shop/eu/orders", 12, hashing_scheme=HashingScheme.JavaStringHash
    )


def test_no_key_at_risk_names_no_risk(capsys: pytest.CaptureFixture[str]) -> None:
    layout = str(FIXTURES / "migrated-12.json")
    argv = ["audit", "a", "b", "--from", "pulsar:JavaStringHash", "--partitions", "12"]
    out = io.StringIO()
    assert cli.main([*argv, "--to-layout", layout, "--json"], out) == 0
    data = json.loads(out.getvalue())
    assert data["at_risk_keys"] == 0 and data["risk"] is None
    assert data["risk_rule"] == "legacy routing scheme differs from the source's"
    out = io.StringIO()
    assert cli.main([*argv, "--to-layout", layout], out) == 0
    assert "order at risk: none (the rule: " in out.getvalue()

"""The ``keyshared`` command line: layout, route, decide, demo."""

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import pytest

import keyshared as ks
from keyshared import TopicLayout, cli


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = cli.main(list(argv), out=out)
    return status, out.getvalue()


def test_layout_prints_the_active_segments() -> None:
    status, text = run("layout", "--segments", "2", "--budget", "8")
    assert status == 0
    lines = text.splitlines()
    assert lines[0] == "epoch 0, next segment id 2, 2 active segment(s), 8 bucket(s)"
    assert lines[1].split() == [
        "id",
        "descriptor",
        "state",
        "buckets",
        "splits",
        "parents",
        "children",
        "created_ms",
        "sealed_ms",
    ]
    assert lines[2].split()[:4] == ["0", "0000-7fff-0", "active", "4"]
    assert lines[3].split()[4] == "16384,32768,49152"


def test_layout_json_and_response_and_all(tmp_path: Path) -> None:
    layout = TopicLayout.initial(1).split_segment(0, 7)
    path = tmp_path / "layout.json"
    path.write_text(layout.to_json())
    status, text = run("layout", "--layout", str(path), "--json")
    assert status == 0 and TopicLayout.from_dict(json.loads(text)) == layout
    _, text = run("layout", "--layout", str(path), "--response")
    assert json.loads(text) == layout.layout_response()
    _, text = run("layout", "--layout", str(path), "--all")
    assert "0000-ffff-0  sealed" in text and len(text.splitlines()) == 5


def test_route_matches_the_library() -> None:
    layout = TopicLayout.initial(4, bucket_budget=16)
    status, text = run("route", "hello", "world", "--segments", "4", "--budget", "16", "--json")
    assert status == 0
    rows = [json.loads(line) for line in text.splitlines()]
    for row in rows:
        assert (row["segment_id"], row["bucket"]) == layout.route(row["key"])
        assert row["key_hash"] == ks.key_hash(row["key"])
        assert row["hash_b"] == ks.routing.bucket_hash(row["key"])
    assert rows[0]["key_hash"] == 0x248BFA47


def test_route_table_and_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("alpha\nbeta\n"))
    status, text = run("route", "hello", "--stdin")
    assert status == 0
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["key", "key_hash", "segment_hash", "hash_b"]
    assert [line.split()[0] for line in lines[1:]] == ["hello", "alpha", "beta"]
    assert lines[1].split()[1:4] == ["248bfa47", "248b", "fa47"]


def test_route_stdin_leaves_out_a_byte_order_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A BOM opening the input belongs to its encoding; one inside a later key is kept."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("\ufeffalpha\r\n\ufeffbeta\n"))
    status, text = run("route", "--stdin", "--json")
    assert status == 0
    assert [json.loads(line)["key"] for line in text.splitlines()] == ["alpha", "\ufeffbeta"]


def test_route_without_keys_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, _ = run("route")
    assert status == 2
    assert "no keys given" in capsys.readouterr().err


def write_snapshot(tmp_path: Path, **changes: object) -> str:
    layout = TopicLayout.initial(2)
    data = {
        "layout": layout.to_dict(),
        "load_by_segment": {
            "0": {"msg_rate_in": 10, "modified_at_ms": 0},
            "1": {"msg_rate_in": 20, "modified_at_ms": 0},
        },
        "stream_consumer_count_by_sub": {"orders": 1},
        "now_ms": 600_000,
    }
    data.update(changes)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_decide_prints_the_action_and_why(tmp_path: Path) -> None:
    status, text = run("decide", write_snapshot(tmp_path))
    assert status == 0
    assert text.splitlines() == ["merge segment_id_1=0 segment_id_2=1", "reason: cold"]
    status, text = run("decide", write_snapshot(tmp_path, last_merge_at_ms=599_000), "--json")
    decision = json.loads(text)
    assert decision["action"] == "none" and "merge cooldown (299000 ms left)" in decision["reason"]


def test_decide_reads_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = Path(write_snapshot(tmp_path, stream_consumer_count_by_sub={"s": 9})).read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    status, out = run("decide", "-", "--json")
    assert status == 0
    assert json.loads(out) == {
        "action": "rebucket",
        "segment_ids": [0, 1],
        "bucket_count": 8,
        "reason": "below-split-rate-floor",
    }


def test_decide_takes_the_release_from_the_snapshot_or_the_flag(tmp_path: Path) -> None:
    """5.0.0-M1 has no entry buckets: where master rebuckets a quiet topic for its consumers,
    it splits the busiest segment."""
    quiet = write_snapshot(tmp_path, stream_consumer_count_by_sub={"s": 9})
    assert json.loads(run("decide", quiet, "--json")[1])["action"] == "rebucket"
    m1 = {"action": "split", "segment_id": 1, "reason": "consumer-count"}
    assert json.loads(run("decide", quiet, "--json", "--pulsar-version", "5.0.0-M1")[1]) == m1
    saved = write_snapshot(
        tmp_path, stream_consumer_count_by_sub={"s": 9}, pulsar_version="5.0.0-M1"
    )
    assert json.loads(run("decide", saved, "--json")[1]) == m1
    assert (
        json.loads(run("decide", saved, "--json", "--pulsar-version", "master")[1])["action"]
        == "rebucket"
    )


def test_decide_refuses_an_unknown_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("decide", write_snapshot(tmp_path), "--pulsar-version", "4.2")[0] == 2
    assert "--pulsar-version '4.2': scalable topics need Pulsar 5.0" in capsys.readouterr().err
    assert run("decide", write_snapshot(tmp_path, pulsar_version="5.0"))[0] == 2
    assert "snapshot.pulsar_version must be one of" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"load_by_segment": {"5": {"modified_at_ms": 0}}}, "load_by_segment names segment 5"),
        ({"load_by_segment": {"0": {"msg_rate_in": -1, "modified_at_ms": 0}}}, "msg_rate_in"),
        ({"policy": {"merge_msg_rate_in": "x"}}, "merge_msg_rate_in"),
        ({"now_ms": "noon"}, "now_ms"),
    ],
)
def test_decide_reports_bad_snapshots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, message: str
) -> None:
    status, out = run("decide", write_snapshot(tmp_path, **changes))
    assert status == 2 and out == ""
    err = capsys.readouterr().err
    assert err.startswith("keyshared decide: error:") and message in err


def test_decide_apply_prints_the_layout_the_controller_would_leave(tmp_path: Path) -> None:
    path = write_snapshot(
        tmp_path,
        layout=TopicLayout.initial(2, 4)
        .rebucket_segment(0, 600, 1)
        .rebucket_segment(1, 600, 2)
        .to_dict(),
        load_by_segment={
            "2": {"msg_rate_in": 10, "modified_at_ms": 0},
            "3": {"msg_rate_in": 20, "modified_at_ms": 0},
        },
        last_rebucket_at_ms=None,
    )
    status, text = run("decide", path, "--apply")
    assert status == 0
    lines = text.splitlines()
    assert lines[:2] == ["merge segment_id_1=2 segment_id_2=3", "reason: cold"]
    assert lines[3].startswith("epoch 3, next segment id 5, 1 active segment(s), 1024 bucket(s)")
    status, text = run("decide", path, "--apply", "--json")
    result = json.loads(text)
    assert result["decision"]["action"] == "merge"
    layout = TopicLayout.from_dict(result["layout"])
    # The merge is clamped to max_entry_buckets_per_segment, as the controller does.
    assert [s.bucket_count for s in layout.active_segments()] == [1024]


def test_decide_apply_with_no_action_prints_the_same_layout(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, policy={"enabled": False})
    status, text = run("decide", path, "--apply", "--json")
    assert status == 0
    result = json.loads(text)
    assert result["decision"]["action"] == "none"
    assert result["layout"] == TopicLayout.initial(2).to_dict()


@pytest.mark.parametrize(
    "changes",
    [
        {"policy": {"merge_msg_rate_in": 1e9}},
        {"policy": {"max_entry_buckets_per_segment": 0}},
        {
            "namespace_policy": {"merge_msg_rate_in": 5_000},
            "topic_policy": {"split_msg_rate_in": 2_000},
        },
    ],
)
def test_decide_treats_an_invalid_resolved_policy_as_disabled(
    tmp_path: Path, changes: dict
) -> None:
    status, text = run("decide", write_snapshot(tmp_path, **changes))
    assert status == 0
    action, reason = text.splitlines()
    assert action == "none" and reason.startswith("reason: disabled: invalid policy: ")


def test_decide_reports_missing_files_and_bad_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("decide", str(tmp_path / "nope.json"))[0] == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert run("decide", str(bad))[0] == 2
    assert capsys.readouterr().err.count("error") == 2


def _stdin_bytes(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    """Standard input as a terminal or pipe gives it: text over bytes."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize(
    "encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"]
)
def test_decide_reads_a_snapshot_in_any_json_encoding_from_a_file_and_stdin_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    """A byte order mark (Windows tools write one) and UTF-16 (PowerShell's ``>``) are read
    the same from a file as from standard input."""
    text = Path(write_snapshot(tmp_path)).read_text()
    path = tmp_path / "encoded.json"
    path.write_bytes(text.encode(encoding))
    want = run("decide", write_snapshot(tmp_path), "--json")
    assert want[0] == 0
    assert run("decide", str(path), "--json") == want
    _stdin_bytes(monkeypatch, text.encode(encoding))
    assert run("decide", "-", "--json") == want


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty, where a JSON document was expected"),
        (b" \n\t", "empty, where a JSON document was expected"),
        (b'{"layout": {"epoch": 0', "the JSON ends early (line 1, column 23)"),
        (b'{"now_ms": \xff}', "not UTF-8 text: bytes ff at offset 11 (invalid start byte)"),
        (b"\xff\xfe{\x00\xff\xdc", "not UTF-16 text"),
        (b'{"a": 1} x', "not valid JSON at line 1, column 10: Extra data"),
    ],
    ids=["empty", "blank", "truncated", "not UTF-8", "bad UTF-16", "extra data"],
)
def test_decide_names_the_file_and_what_is_wrong_with_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    message: str,
) -> None:
    path = tmp_path / "snapshot.json"
    path.write_bytes(data)
    assert run("decide", str(path))[0] == 2
    err = capsys.readouterr().err
    assert err.startswith(f"keyshared decide: error: SNAPSHOT.json {path}: ") and message in err
    _stdin_bytes(monkeypatch, data)
    assert run("decide", "-")[0] == 2
    err = capsys.readouterr().err
    assert err.startswith("keyshared decide: error: SNAPSHOT.json -: <stdin>: ") and message in err


def test_demo_prints_a_routing_table() -> None:
    status, text = run("demo", "--keys", "5", "--segments", "2", "--budget", "4")
    assert status == 0
    lines = text.splitlines()
    assert lines[0].startswith("5 keys under an initial layout of 2 segment(s)")
    layout = TopicLayout.initial(2, 4)
    for i, line in enumerate(lines[3:8]):
        key, _, _, _, descriptor, bucket, _ = line.split()
        sid, b = layout.route(f"order-{i:04d}")
        assert (key, descriptor, int(bucket)) == (
            f"order-{i:04d}",
            layout.segments[sid].descriptor,
            b,
        )
    assert "keys per (segment, bucket)" in text


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["layout", "--segments", "two"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        cli.main([])
    assert run("demo", "--keys", "0")[0] == 2
    assert run("layout", "--segments", "0")[0] == 2
    capsys.readouterr()


def test_one_more_subcommand_is_one_more_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--times", type=int, default=1)

    def body(args: argparse.Namespace, out: TextIO) -> int:
        out.write("tick\n" * args.times)
        return 0

    monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, cli.Command("tick", "x", configure, body)])
    assert run("tick", "--times", "2") == (0, "tick\ntick\n")


def test_python_dash_m_keyshared() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "keyshared", "route", "hello"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "248bfa47" in done.stdout


def test_route_stdin_closed_entirely_exits_2_naming_the_other_way() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "keyshared", "route", "--stdin"],
        preexec_fn=lambda: os.close(0),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "--stdin: standard input is closed" in done.stderr
    assert done.stderr.endswith("give KEY arguments\n")


# --- --pulsar-version ------------------------------------------------------------------------

M1 = "5.0.0-M1"


def test_route_under_m1_takes_the_low_half_and_one_bucket(tmp_path: Path) -> None:
    layout = TopicLayout.initial(1, bucket_budget=8).split_segment(0, 3).split_segment(1, 4)
    path = tmp_path / "layout.json"
    path.write_text(layout.to_json())
    keys = [f"order-{i}" for i in range(40)]
    status, text = run("route", *keys, "--layout", str(path), "--pulsar-version", M1, "--json")
    assert status == 0
    rows = [json.loads(line) for line in text.splitlines()]
    for row in rows:
        h = ks.key_hash(row["key"])
        assert (row["segment_id"], row["bucket"]) == layout.route(row["key"], pulsar_version=M1)
        assert row["segment_id"] == layout.find_active_segment(h & 0xFFFF).segment_id
        assert (row["segment_hash"], row["bucket"]) == (h & 0xFFFF, 0)
        assert row["hash_b"] is None and row["canonical_bucket_hash"] is None
    master = [
        json.loads(line)
        for line in run("route", *keys, "--layout", str(path), "--json")[1].splitlines()
    ]
    assert [r["segment_id"] for r in master] == [layout.route(k)[0] for k in keys]
    assert [r["segment_id"] for r in master] != [r["segment_id"] for r in rows]
    status, table = run("route", "hello", "--pulsar-version", M1)
    assert table.splitlines()[1].split()[1:4] == ["248bfa47", "fa47", "-"]


def test_layout_and_demo_under_m1_show_one_bucket_per_segment() -> None:
    status, text = run("layout", "--segments", "2", "--budget", "8", "--pulsar-version", M1)
    assert status == 0
    lines = text.splitlines()
    assert lines[0] == "epoch 0, next segment id 2, 2 active segment(s), 2 bucket(s)"
    assert lines[2].split()[3:5] == ["1", "-"]
    _, response = run("layout", "--segments", "2", "--response", "--pulsar-version", M1)
    segments = json.loads(response)["segments"]
    assert [s["descriptor"] for s in segments] == ["0000-7fff-0", "8000-ffff-1"]
    assert all("bucket_splits" not in s for s in segments)
    status, text = run("demo", "--keys", "6", "--segments", "2", "--pulsar-version", M1)
    assert status == 0
    lines = text.splitlines()
    assert "(2 bucket(s) in all), as Pulsar 5.0.0-M1 routes" in lines[0]
    layout = TopicLayout.initial(2, 8)
    for i, line in enumerate(lines[3:9]):
        key, _, segment_hash, _, descriptor, bucket, _ = line.split()
        sid, b = layout.route(key, pulsar_version=M1)
        assert (key, descriptor, int(bucket)) == (
            f"order-{i:04d}",
            layout.segments[sid].descriptor,
            b,
        )
        assert int(segment_hash, 16) == ks.key_hash(key) & 0xFFFF


@pytest.mark.parametrize("argv", [["layout"], ["route", "k"], ["demo"]])
@pytest.mark.parametrize(
    ("release", "message"),
    [
        ("latest", "--pulsar-version 'latest' is not a Pulsar release: give one of master,"),
        ("4.2", "--pulsar-version '4.2': scalable topics need Pulsar 5.0"),
        ("4.2.4", "--pulsar-version '4.2.4': scalable topics need Pulsar 5.0"),
    ],
)
def test_an_unknown_release_names_the_flag(
    argv: list[str], release: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(*argv, "--pulsar-version", release)[0] == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["layout"], ["route", "k"], ["demo"]])
def test_a_release_named_by_its_number_takes_the_nearest_profile_with_a_note(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(*argv, "--pulsar-version", "5.0.1")[0] == 0
    assert "note: keyshared has no profile for Pulsar 5.0.1; checking against master" in (
        capsys.readouterr().err
    )
    assert run(*argv, "--pulsar-version", "5.0.0-M1")[0] == 0
    assert capsys.readouterr().err == ""


def test_route_hex_keys_route_their_bytes() -> None:
    status, text = run("route", "--key-encoding", "hex", "ff00", "--json")
    assert status == 0
    row = json.loads(text)
    assert row["key"] == "ff00" and row["key_hash"] == ks.key_hash(b"\xff\x00")
    status, text = run("route", "--key-encoding", "base64", "/wA=", "--json")
    assert json.loads(text)["key_hash"] == ks.key_hash(b"\xff\x00")


def test_route_stdin_empty_and_not_utf8(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin_bytes(monkeypatch, b"")
    assert run("route", "--stdin")[0] == 2
    assert "--stdin: standard input is empty" in capsys.readouterr().err
    _stdin_bytes(monkeypatch, b"ok\nab\xffc\n")
    assert run("route", "--stdin")[0] == 2
    assert "not UTF-8 (byte 0xff at offset 5)" in capsys.readouterr().err
    # A blank line is the empty key, whose hash is 0.
    _stdin_bytes(monkeypatch, b"a\n\nb\n")
    status, text = run("route", "--stdin", "--json")
    assert status == 0 and [json.loads(r)["key_hash"] for r in text.splitlines()][1] == 0


def test_decide_apply_json_is_a_layout_for_the_next_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot = Path(__file__).parents[2] / "docs" / "examples" / "snapshot.json"
    status, text = run("decide", str(snapshot), "--apply", "--json")
    assert status == 0
    _stdin_bytes(monkeypatch, text.encode())
    status, shown = run("layout", "--layout", "-", "--json")
    assert status == 0
    assert json.loads(shown) == json.loads(text)["layout"]


def test_version_says_the_hash_and_the_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"keyshared {ks.__version__}"
    assert said[1].startswith(f"key hash: HASH_VERSION {ks.HASH_VERSION}")
    assert "master, 5.0.0-M1, 4.2, 4.0" in said[2]

"""``keyshared explain --key-encoding {utf-8,hex,base64}``: binary keys given with ``--key`` and
in the ``--keys`` sample are hashed as their bytes, for a Key_Shared subscription's stats and
for a scalable topic, and named as written (as ``keyshared route`` names them), with the
encoding beside them in the JSON."""

from __future__ import annotations

import base64
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from keyshared import _flags
from keyshared.cli import main
from keyshared.errors import InvalidArgument
from keyshared.explain import KEY_ENCODINGS, explain_scalable, explain_subscription, read_snapshot
from keyshared.explain.stats import read_subscription
from keyshared.routing import key_hash, sticky_key_hash

SUB = "sub"
SCALABLE = Path(__file__).parents[1] / "fixtures" / "scalable" / "split-merge.json"

#: A binary key (not UTF-8), and the ways to write it.
KEY = b"\xff\x00\x80"
WRITTEN = {"hex": KEY.hex(), "base64": base64.b64encode(KEY).decode("ascii")}


def ranges_around(hashes: set[int]) -> tuple[list[list[int]], list[list[int]]]:
    """The ranges of two consumers: one holding exactly ``hashes``, one the rest of
    [1, 65535]."""
    mine = [[h, h] for h in sorted(hashes)]
    rest, start = [], 1
    for h in sorted(hashes):
        if start < h:
            rest.append([start, h - 1])
        start = h + 1
    if start <= 65535:
        rest.append([start, 65535])
    return mine, rest


def stats(held_by_rest: int | None = None) -> dict[str, Any]:
    """Stats of a Key_Shared subscription where ``binary`` holds the key's sticky hash alone
    (``rest`` everything else, the hash of the key's written text included); ``rest`` holds
    ``held_by_rest`` as a draining hash when given."""
    h = sticky_key_hash(KEY)
    assert all(sticky_key_hash(w) != h for w in WRITTEN.values())
    mine, rest = ranges_around({h})

    def consumer(name: str, ranges: list[list[int]]) -> dict[str, Any]:
        return {
            "consumerName": name,
            "keyHashRangeArrays": ranges,
            "availablePermits": 1000,
            "unackedMessages": 0,
            "blockedConsumerOnUnackedMsgs": False,
            "msgRateOut": 0.0,
        }

    others = consumer("rest", rest)
    if held_by_rest is not None:
        others["drainingHashes"] = [{"hash": held_by_rest, "unackMsgs": 1, "blockedAttempts": 3}]
        others["drainingHashesCount"] = 1
        others["drainingHashesUnackedMessages"] = 1
    sub = {
        "type": "Key_Shared",
        "msgBacklog": 0,
        "unackedMessages": 0,
        "consumers": [consumer("binary", mine), others],
    }
    return {"msgInCounter": 0, "subscriptions": {SUB: sub}}


def run(tmp_path: Path, document: Any, *argv: str) -> tuple[int, str, str]:
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(document))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["explain", str(path), "--subscription", SUB, *argv], out=out)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_a_binary_key_lands_on_the_consumer_holding_the_hash_of_its_bytes(
    encoding: str, tmp_path: Path
) -> None:
    written, h = WRITTEN[encoding], sticky_key_hash(KEY)
    status, out, err = run(
        tmp_path, stats(), "--key-encoding", encoding, "--key", written, "--json"
    )
    assert status == 0, err
    got = json.loads(out)
    assert got["key_encoding"] == encoding
    assert got["keys"] == [
        {"key": written, "hash": h, "owner": "binary", "held_by": None, "keyless": False}
    ]
    # Without the encoding, the same text is a UTF-8 key of another hash and consumer.
    status, out, _ = run(tmp_path, stats(), "--key", written, "--json")
    plain = json.loads(out)
    assert plain["key_encoding"] == "utf-8"
    assert plain["keys"][0]["hash"] == sticky_key_hash(written) != h
    assert plain["keys"][0]["owner"] == "rest"
    # The text names the key as written, under a header that says how.
    status, out, _ = run(tmp_path, stats(), "--key-encoding", encoding, "--key", written)
    assert f"key ({encoding})" in out
    assert any(line.split() == [written, str(h), "binary", "-"] for line in out.splitlines())


@pytest.mark.parametrize("encoding", ["hex", "base64"])
@pytest.mark.parametrize("suffix", [".txt", ".csv"])
def test_a_sample_of_binary_keys_counts_for_the_consumer_of_their_bytes(
    encoding: str, suffix: str, tmp_path: Path
) -> None:
    written, h = WRITTEN[encoding], sticky_key_hash(KEY)
    keys = tmp_path / f"keys{suffix}"
    keys.write_text(f"{written},5\n" if suffix == ".csv" else f"{written}\n" * 5)
    status, out, err = run(
        tmp_path, stats(held_by_rest=h), "--key-encoding", encoding, "--keys", str(keys), "--json"
    )
    assert status == 0, err
    got = json.loads(out)
    shares = {s["consumer"]: s["messages"] for s in got["shares"]}
    assert shares == {"binary": 5, "rest": 0}
    assert got["held"][0]["hash"] == h and got["held"][0]["keys"] == [written]
    assert got["verdict"]["waits"][0]["sample_messages"] == 5


def test_the_library_takes_the_encoding_and_checks_it_first() -> None:
    sub = read_subscription(stats(), SUB)
    e = explain_subscription(sub, keys=[WRITTEN["hex"]], key_encoding="hex")
    assert (e.keys[0].owner, e.key_encoding) == ("binary", "hex")
    assert e.to_dict()["keys"][0]["key"] == WRITTEN["hex"]
    with pytest.raises(InvalidArgument, match=r"keys\[1\] 'zz' is not hex"):
        explain_subscription(sub, keys=["00", "zz"], key_encoding="hex")
    with pytest.raises(InvalidArgument, match="sample key '!!' is not base64"):
        explain_subscription(sub, sample={"!!": 1}, key_encoding="base64")
    with pytest.raises(InvalidArgument, match="key_encoding must be one of utf-8, hex, base64"):
        explain_subscription(sub, keys=["k"], key_encoding="utf-16")
    # The command line's choices are the library's.
    assert _flags.KEY_ENCODINGS == KEY_ENCODINGS


@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_a_binary_key_of_a_scalable_topic_routes_by_its_bytes(
    encoding: str, capsys: pytest.CaptureFixture[str]
) -> None:
    written = WRITTEN[encoding]
    snapshot = read_snapshot(json.loads(SCALABLE.read_text()))
    want = explain_scalable(snapshot, SUB, keys=[written], key_encoding=encoding).keys[0]
    assert want.key == written and want.key_hash == key_hash(KEY)
    argv = ["explain", str(SCALABLE), "--subscription", SUB, "--key", written]
    assert main([*argv, "--key-encoding", encoding, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["key_encoding"] == encoding
    assert got["keys"][0]["key"] == written and got["keys"][0]["key_hash"] == key_hash(KEY)
    assert got["keys"][0]["segment_id"] == want.segment_id
    assert main([*argv, "--key-encoding", encoding]) == 0
    assert f"key ({encoding})" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--key-encoding", "hex", "--key", "ff0"], "--key 'ff0' is not hex (--key-encoding hex)"),
        (
            ["--key-encoding", "base64", "--key", "@@"],
            "--key '@@' is not base64 (--key-encoding base64)",
        ),
        (["--key-encoding", "hex"], "--key-encoding is for the keys of --key or --keys: give one"),
    ],
)
def test_a_bad_key_is_one_line_naming_the_flags(
    argv: list[str], message: str, tmp_path: Path
) -> None:
    status, out, err = run(tmp_path, stats(), *argv)
    assert (status, out) == (2, "")
    assert err == f"keyshared explain: error: {message}\n"


def test_a_bad_key_in_the_sample_names_the_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.csv"
    keys.write_text("key,count\nff00,2\nnot-hex,1\n")
    status, out, err = run(tmp_path, stats(), "--key-encoding", "hex", "--keys", str(keys))
    assert (status, out) == (2, "")
    assert err == (
        f"keyshared explain: error: --keys {keys}: 'not-hex' is not hex (--key-encoding hex)\n"
    )

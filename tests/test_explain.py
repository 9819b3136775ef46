"""keyshared.explain on recorded stats of a Pulsar 4.2.4 broker (tests/fixtures/stats, written
by tests/test_broker_explain.py) and on stats made up from keyshared's own ring."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulsar_broker import owner_by_ranges

from keyshared import ConsistentHashingStickyKeyConsumerSelector
from keyshared.cli import main
from keyshared.explain import (
    HASH_COUNT,
    HASH_MIN,
    NO_OWNER,
    explain_subscription,
    fetch_stats,
    load_keys,
    load_stats,
    read_subscription,
    stats_url,
)
from keyshared.hashing import sticky_key_hash

FIXTURES = Path(__file__).parent / "fixtures" / "stats"
HELD = FIXTURES / "held.json"
SUB = "sub"


def held() -> Any:
    return load_stats(HELD)


def sample() -> dict[str, int]:
    return load_keys(FIXTURES / "held.keys.txt")


def ring_stats(names: list[str], points: int = 100) -> dict[str, Any]:
    """Topic stats of a Key_Shared subscription whose consumers hold the ranges of
    keyshared's ring, as a broker with that ring reports them."""
    selector = ConsistentHashingStickyKeyConsumerSelector(points)
    for i, name in enumerate(names):
        selector.add_consumer(i, name)
    ranges = selector.get_consumer_key_hash_ranges()
    consumers = [
        {
            "consumerName": name,
            "keyHashRangeArrays": [[r.start, r.end] for r in ranges.get(i, [])],
            "availablePermits": 1000,
            "unackedMessages": 0,
            "blockedConsumerOnUnackedMsgs": False,
            "msgRateOut": 0.0,
        }
        for i, name in enumerate(names)
    ]
    sub = {"type": "Key_Shared", "msgBacklog": 0, "unackedMessages": 0, "consumers": consumers}
    return {"msgInCounter": 0, "subscriptions": {SUB: sub}}


# --- reading -------------------------------------------------------------------------------


def broken(edit: str) -> Any:
    """The held fixture with one edit: ``path.to.field`` removed, or ``path=value`` set."""
    stats = held()
    path, _, value = edit.partition("=")
    *parents, last = path.split(".")
    node = stats
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value:
        node[int(last) if isinstance(node, list) else last] = json.loads(value)
    else:
        del node[last]
    return stats


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        ("subscriptions", ValueError, "subscriptions is missing"),
        ("subscriptions.sub.type", ValueError, r"subscriptions\['sub'\]\.type is missing"),
        (
            "subscriptions.sub.consumers",
            ValueError,
            r"subscriptions\['sub'\]\.consumers is missing",
        ),
        (
            "subscriptions.sub.consumers.2.keyHashRangeArrays",
            ValueError,
            r"subscriptions\['sub'\]\.consumers\[2\]\.keyHashRangeArrays is missing",
        ),
        (
            "subscriptions.sub.consumers.0.consumerName",
            ValueError,
            r"consumers\[0\]\.consumerName is missing",
        ),
        (
            "subscriptions.sub.consumers.4.availablePermits",
            ValueError,
            r"consumers\[4\]\.availablePermits is missing",
        ),
        (
            'subscriptions.sub.consumers.1.availablePermits="lots"',
            TypeError,
            r"consumers\[1\]\.availablePermits must be an int, got str",
        ),
        (
            "subscriptions.sub.consumers.1.keyHashRangeArrays=[[5, 2]]",
            ValueError,
            r"consumers\[1\]\.keyHashRangeArrays\[0\]\[1\] must be >= 5",
        ),
        (
            "subscriptions.sub.consumers.1.keyHashRangeArrays=[[1, 2, 3]]",
            ValueError,
            r"consumers\[1\]\.keyHashRangeArrays\[0\] must be a \[start, end\] pair",
        ),
        (
            "subscriptions.sub.consumers.1.keyHashRangeArrays=[[1, 70000]]",
            ValueError,
            r"keyHashRangeArrays\[0\]\[1\] must be <= 65535",
        ),
        (
            "subscriptions.sub.consumers.4.keyHashRangeArrays=[[1, 500]]",
            ValueError,
            r"consumers\[4\]\.keyHashRangeArrays: \[1, 500\] overlaps"
            r" a range of consumers\[3\] \(stuck\)",
        ),
        (
            "subscriptions.sub.consumers.0.drainingHashes.0.unackMsgs",
            ValueError,
            r"consumers\[0\]\.drainingHashes\[0\]\.unackMsgs is missing",
        ),
        ("subscriptions.sub.consumers=7", TypeError, r"consumers must be a list, got int"),
        ("subscriptions.sub=[]", TypeError, r"subscriptions\['sub'\] must be a mapping"),
        (
            'subscriptions.sub.type="Exclusive"',
            ValueError,
            r"type is 'Exclusive': .* not Key_Shared",
        ),
    ],
)
def test_bad_stats_name_the_field(edit: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        read_subscription(broken(edit), SUB)


def test_an_absent_subscription_is_named_with_those_there_are() -> None:
    with pytest.raises(ValueError, match=r"subscriptions has no 'other' \(it has 'sub'\)"):
        read_subscription(held(), "other")


def test_unknown_fields_are_ignored_and_draining_fields_are_optional() -> None:
    stats = held()
    stats["subscriptions"][SUB]["someFutureField"] = {"x": 1}
    for c in stats["subscriptions"][SUB]["consumers"]:
        c["anotherOne"] = [1, 2]
        for name in ("drainingHashes", "drainingHashesCount", "drainingHashesUnackedMessages"):
            del c[name]
    sub = read_subscription(stats, SUB)
    assert [c.name for c in sub.consumers] == ["old-0", "old-1", "old-2", "stuck", "newcomer"]
    assert not any(c.draining_hashes for c in sub.consumers)
    assert explain_subscription(sub).held == ()


def test_namesakes_get_labels_by_position() -> None:
    sub = read_subscription(ring_stats(["a", "b", "a"]), SUB)
    assert [c.label for c in sub.consumers] == ["a#0", "b", "a#2"]
    assert sub.consumer("a#2").index == 2
    with pytest.raises(
        ValueError, match=r"no consumer 'a' in subscription 'sub' \(consumers: 'a#0', 'b', 'a#2'\)"
    ):
        sub.consumer("a")


# --- answers on the recorded broker --------------------------------------------------------


# The run of tests/test_broker_explain.py on each release: "" for 4.2.4, "-4.0.7".
RELEASES = pytest.mark.parametrize("release", ["", "-4.0.7"], ids=["4.2.4", "4.0.7"])


@RELEASES
def test_the_recorded_held_hashes_name_holders_and_blocked_keys(release: str) -> None:
    stats = load_stats(FIXTURES / f"held{release}.json")
    e = explain_subscription(read_subscription(stats, SUB), sample=sample())
    consumers = stats["subscriptions"][SUB]["consumers"]
    want = sorted(
        (d["hash"], c["consumerName"], d["unackMsgs"], d["blockedAttempts"])
        for c in consumers
        for d in c["drainingHashes"]
    )
    assert [(h.hash, h.held_by, h.unack_msgs, h.blocked_attempts) for h in e.held] == want
    assert {h.owner for h in e.held} == {"newcomer"}
    # What the broker did not deliver to the newcomer is exactly what the held hashes block.
    received = json.loads((FIXTURES / f"held.received{release}.json").read_text())
    owned = {k for k in sample() if owner_by_ranges(stats, k) == "newcomer"}
    blocked = {k for h in e.held for k in h.keys}
    assert blocked and blocked <= owned
    assert owned - set(received["newcomer"]) == blocked


def test_the_recorded_stuck_consumer_and_key_answers() -> None:
    sub = read_subscription(held(), SUB)
    e = explain_subscription(sub, keys=["key-7", "new-3"])
    assert [(s.consumer, s.reasons) for s in e.stuck] == [("stuck", ("no permits",))]
    held_7 = next(h for h in e.held if "key-7" in h.keys)
    answers = {k.key: k for k in e.keys}
    assert answers["key-7"].hash == sticky_key_hash("key-7") == held_7.hash
    assert (answers["key-7"].owner, answers["key-7"].held_by) == ("newcomer", held_7.held_by)
    assert answers["new-3"].held_by is None
    assert answers["new-3"].owner == owner_by_ranges(held(), "new-3")


def test_a_consumer_blocked_on_unacked_messages_is_named() -> None:
    stats = broken("subscriptions.sub.consumers.1.blockedConsumerOnUnackedMsgs=true")
    e = explain_subscription(read_subscription(stats, SUB))
    assert [(s.consumer, s.reasons) for s in e.stuck] == [
        ("old-1", ("blocked on unacked messages",)),
        ("stuck", ("no permits",)),
    ]


@RELEASES
def test_the_recorded_join_and_leave_reproduce_the_broker(release: str) -> None:
    before = read_subscription(load_stats(FIXTURES / f"before-join{release}.json"), SUB)
    after = read_subscription(load_stats(FIXTURES / f"held{release}.json"), SUB)
    join = explain_subscription(before, join="newcomer", sample=sample()).what_if
    leave = explain_subscription(after, leave="newcomer", sample=sample()).what_if
    assert join is not None and leave is not None
    assert join.ring_matches and leave.ring_matches
    assert {s.consumer: s.ranges for s in join.shares_after} == {
        c.label: c.ranges for c in after.consumers
    }
    assert {s.consumer: s.ranges for s in leave.shares_after} == {
        c.label: c.ranges for c in before.consumers
    }
    assert (
        join.moved_share == leave.moved_share == after.consumer("newcomer").hash_count / HASH_COUNT
    )
    assert {m.key for m in join.moved_keys} == {m.key for m in leave.moved_keys}
    assert leave.moved_traffic_share == pytest.approx(
        len(leave.moved_keys) / sum(sample().values())
    )


def test_a_ring_of_other_points_is_said_not_to_match() -> None:
    w = explain_subscription(read_subscription(held(), SUB), leave="old-0", points=50).what_if
    assert w is not None and not w.ring_matches
    assert w.mismatch.startswith("old-0: the broker reports 80 range(s)")


# --- properties ----------------------------------------------------------------------------

names = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=6)


@given(names, st.integers(1, 40), st.lists(st.text(max_size=8), max_size=40))
def test_every_hash_has_one_owner_and_shares_add_up(
    consumers: list[str], points: int, keys: list[str]
) -> None:
    sub = read_subscription(ring_stats(consumers, points), SUB)
    assert (sub.owners[HASH_MIN:] != NO_OWNER).all()
    e = explain_subscription(sub, sample=dict.fromkeys(keys, 2), keys=keys)
    assert sum(s.hashes for s in e.shares) == HASH_COUNT
    assert sum(s.hash_share for s in e.shares) == pytest.approx(1.0)
    if keys:
        assert sum(s.traffic_share or 0.0 for s in e.shares) == pytest.approx(1.0)
    for k in e.keys:
        owner = sub.owner_of(k.hash)
        assert owner is not None and k.owner == owner.label
        assert any(s <= k.hash <= end for s, end in owner.ranges)


@given(names, st.data())
def test_a_leave_moves_exactly_the_leavers_ranges(
    consumers: list[str], data: st.DataObject
) -> None:
    sub = read_subscription(ring_stats(consumers, 20), SUB)
    gone = data.draw(st.sampled_from(sub.consumers))
    w = explain_subscription(sub, leave=gone.label, points=20).what_if
    assert w is not None and w.ring_matches
    moved = [(m.start, m.end) for m in w.moves]
    assert {m.source for m in w.moves} <= {gone.label}
    assert _merged(moved) == _merged(list(gone.ranges))
    assert len(consumers) == 1 or {m.target for m in w.moves}.isdisjoint({gone.label, None})


@given(names, st.text(min_size=1, max_size=6))
def test_a_join_moves_hashes_only_to_the_newcomer(consumers: list[str], name: str) -> None:
    sub = read_subscription(ring_stats(consumers, 20), SUB)
    w = explain_subscription(sub, join=name, points=20).what_if
    assert w is not None and w.ring_matches
    newcomer = w.shares_after[-1]
    assert {m.target for m in w.moves} == {newcomer.consumer}
    assert _merged([(m.start, m.end) for m in w.moves]) == _merged(list(newcomer.ranges))


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(ranges):
        if out and out[-1][1] + 1 == s:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


# --- sources -------------------------------------------------------------------------------


def test_key_files_read_lines_or_csv_counts(tmp_path: Path) -> None:
    text = tmp_path / "keys.txt"
    text.write_text("a\nb,c\na\n")
    assert load_keys(text) == {"a": 2, "b,c": 1}
    table = tmp_path / "keys.csv"
    table.write_text('key,messages\na,3\n"b,c",2\nd\n')
    assert load_keys(table) == {"a": 3, "b,c": 2, "d": 1}
    table.write_text("a,3\nb,many\n")
    with pytest.raises(ValueError, match=r"keys.csv:2: count 'many' is not an integer"):
        load_keys(table)


def test_stats_urls_follow_pulsars_topic_names() -> None:
    url = "http://broker:8080/"
    assert stats_url(url, "t") == "http://broker:8080/admin/v2/persistent/public/default/t/stats"
    assert stats_url(url, "non-persistent://a/b/t").endswith("/non-persistent/a/b/t/stats")
    with pytest.raises(ValueError, match="not a persistent or non-persistent topic"):
        stats_url(url, "topic://a/b/t")


def test_a_broker_that_does_not_answer_is_an_os_error() -> None:
    with pytest.raises(OSError, match=r"127\.0\.0\.1:9/admin/v2/persistent/public/default/t/stats"):
        fetch_stats("http://127.0.0.1:9", "t", timeout_s=2.0)


# --- the command ---------------------------------------------------------------------------


def run(*argv: str, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None) -> str:
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out = io.StringIO()
    assert main(["explain", *argv], out=out) == 0
    return out.getvalue()


def test_the_command_in_text_json_and_png(tmp_path: Path) -> None:
    keys = str(FIXTURES / "held.keys.txt")
    text = run(str(HELD), "--subscription", SUB, "--keys", keys, "--key", "key-7", "--join", "late")
    assert "31 draining hash(es)" in text and "stuck: no permits" in text
    assert "key-7  8664  newcomer  old-1" in text
    assert "if late joins" in text and "it reproduces the broker's ranges" in text
    png = tmp_path / "ring.png"
    got = json.loads(run(str(HELD), "--subscription", SUB, "--json", "--png", str(png)))
    assert len(got["held"]) == 31 and got["what_if"] is None
    assert png.read_bytes()[:4] == b"\x89PNG"
    mismatch = run(str(HELD), "--subscription", SUB, "--leave", "old-0", "--points", "50")
    assert "does NOT reproduce the broker's ranges" in mismatch


def test_the_command_reads_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    got = run("-", "--subscription", SUB, "--json", stdin=HELD.read_text(), monkeypatch=monkeypatch)
    assert json.loads(got)["subscription"] == SUB


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--subscription", SUB], "give either STATS.json or --url with --topic"),
        (["--url", "http://x", "--subscription", SUB], "--url needs --topic"),
        ([str(HELD), "--subscription", "nope"], "subscriptions has no 'nope'"),
        ([str(HELD), "--subscription", SUB, "--leave", "ghost"], "no consumer 'ghost'"),
        ([str(HELD), "--subscription", SUB, "--points", "0"], "points must be >= 1"),
        (["missing.json", "--subscription", SUB], "missing.json"),
    ],
)
def test_bad_input_exits_2_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "--points" in argv:
        argv = [*argv, "--join", "x"]
    assert main(["explain", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bad_stats_on_the_command_line_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stats = tmp_path / "bad.json"
    stats.write_text(json.dumps(broken("subscriptions.sub.consumers.2.keyHashRangeArrays")))
    assert main(["explain", str(stats), "--subscription", SUB]) == 2
    err = capsys.readouterr().err
    assert "subscriptions['sub'].consumers[2].keyHashRangeArrays is missing" in err
    stats.write_text("{not json")
    assert main(["explain", str(stats), "--subscription", SUB]) == 2
    assert "bad.json: not JSON" in capsys.readouterr().err

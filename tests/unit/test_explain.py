"""keyshared.explain on recorded stats of a Pulsar 4.2.4 broker (tests/fixtures/stats, written
by tests/broker/test_broker_explain.py) and on stats made up from keyshared's own ring."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.pulsar_broker import owner_by_ranges

from keyshared import ConsistentHashingStickyKeyConsumerSelector
from keyshared.cli import main
from keyshared.explain.admin import fetch_stats, stats_url
from keyshared.explain.explanation import explain_subscription
from keyshared.explain.keys import load_keys
from keyshared.explain.stats import HASH_COUNT, HASH_MIN, NO_OWNER, load_stats, read_subscription
from keyshared.routing import sticky_key_hash

FIXTURES = Path(__file__).parents[1] / "fixtures" / "stats"
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


# The run of tests/broker/test_broker_explain.py on each release: "" for 4.2.4, "-4.0.7".
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
    assert "bad.json: not valid JSON at line 1, column 2" in capsys.readouterr().err


# --- the verdict ---------------------------------------------------------------------------


@RELEASES
def test_the_first_four_lines_name_the_waiting_consumer_the_one_taking_nothing_and_why(
    release: str,
) -> None:
    lines = run(str(FIXTURES / f"held{release}.json"), "--subscription", SUB).splitlines()[:4]
    assert lines[0].startswith("verdict: newcomer waits for 31 hash(es) held by old-0 (7),")
    assert "stuck (2)" in lines[0] and "160 message(s) in replay" in lines[0]
    assert lines[1].startswith(
        "stuck takes no messages: no permits, never acked since it connected"
        " (availablePermits 0, 5 unacked of 5 delivered); holds 2 hash(es) newcomer wait(s)"
        " for: will not drain by itself"
    )
    assert lines[2].startswith("old-0, old-1, old-2: never acked since it connected")
    assert "hold 29 hash(es) newcomer wait(s) for: they drain only when acked" in lines[2]
    assert lines[3] == (
        "2 held hash(es) will not drain by themselves: close or restart their holder(s)"
        " to release them"
    )


def test_the_verdict_is_structured_from_the_stats() -> None:
    stats = held()
    e = explain_subscription(read_subscription(stats, SUB), sample=sample())
    v = e.verdict
    assert v is not None and not v.ok
    consumers = stats["subscriptions"][SUB]["consumers"]
    draining = {c["consumerName"]: [d["hash"] for d in c["drainingHashes"]] for c in consumers}
    assert {(w.waiting, w.holder): w.hashes for w in v.waits} == {
        ("newcomer", name): tuple(sorted(hashes)) for name, hashes in draining.items() if hashes
    }
    assert v.not_taking == ("stuck",)
    assert v.never_draining == tuple(sorted(draining["stuck"]))
    assert v.msg_in_replay == stats["subscriptions"][SUB]["msgInReplay"] == e.msg_in_replay
    times = [c[t] for c in consumers for t in ("lastConsumedTimestamp", "lastAckedTimestamp")]
    assert v.stats_time_ms == max([*times, stats["subscriptions"][SUB]["lastConsumedTimestamp"]])
    for c, h in zip(consumers, v.consumers, strict=True):
        assert (h.consumer, h.available_permits, h.unacked_messages, h.msg_out_counter) == (
            c["consumerName"],
            c["availablePermits"],
            c["unackedMessages"],
            c["msgOutCounter"],
        )
        assert h.last_acked_timestamp == c["lastAckedTimestamp"] == 0
        assert h.seconds_since_ack is None and not h.acking
        assert h.holds == len(c["drainingHashes"])
        assert h.will_drain == (c["consumerName"] != "stuck")
    assert {h.consumer: h.waits_for for h in v.consumers}["newcomer"] == 31
    # Every sample message of a held hash is counted once, against its waiting consumer.
    blocked = sum(1 for h in e.held for _ in h.keys)
    assert sum(w.sample_messages or 0 for w in v.waits) == blocked
    assert json.loads(json.dumps(e.to_dict()))["verdict"]["not_taking"] == ["stuck"]


def test_a_consumer_that_acks_is_not_said_to_stall_and_one_that_stopped_is() -> None:
    stats = held()
    now = max(c["lastConsumedTimestamp"] for c in stats["subscriptions"][SUB]["consumers"])
    consumers = stats["subscriptions"][SUB]["consumers"]
    consumers[0]["lastAckedTimestamp"] = now - 2_000
    consumers[1]["lastAckedTimestamp"] = now - 95_000
    v = explain_subscription(read_subscription(stats, SUB)).verdict
    assert v is not None
    health = {h.consumer: h for h in v.consumers}
    assert health["old-0"].acking and health["old-0"].seconds_since_ack == 2.0
    assert health["old-1"].reasons == ("no ack for 95 s",)
    assert any(line.startswith("old-1: no ack for 95 s") for line in v.lines)
    assert not any(line.startswith("old-0") for line in v.lines)


def test_the_unacked_limit_is_named_when_known() -> None:
    stats = broken("subscriptions.sub.consumers.1.blockedConsumerOnUnackedMsgs=true")
    sub = read_subscription(stats, SUB)
    v = explain_subscription(sub, max_unacked_messages=185).verdict
    assert v is not None
    old_1 = next(h for h in v.consumers if h.consumer == "old-1")
    assert old_1.reasons == ("at its unacked limit (185 of 185)", "never acked since it connected")
    assert not old_1.taking_messages and not old_1.will_drain
    assert set(v.not_taking) == {"old-1", "stuck"}
    assert "old-1 takes no messages: at its unacked limit (185 of 185)" in "\n".join(v.lines)
    with pytest.raises(ValueError, match="max_unacked_messages must be >= 0"):
        explain_subscription(sub, max_unacked_messages=-1)


def test_a_subscription_with_nothing_held_says_so() -> None:
    v = explain_subscription(read_subscription(ring_stats(["a", "b"]), SUB)).verdict
    assert (
        v is not None and v.ok and v.lines == ("verdict: no hash is held; 0 message(s) in replay",)
    )


def test_connected_since_is_read_with_nanoseconds() -> None:
    from keyshared.explain.verdicts import _epoch_ms

    assert _epoch_ms("2026-11-25T15:27:58.17493988Z") == 1795620478174
    assert _epoch_ms("2026-11-25T16:27:58+01:00") == 1795620478000
    assert _epoch_ms("yesterday") is None and _epoch_ms(None) is None


# --- keys as Pulsar makes them --------------------------------------------------------------


def test_an_empty_key_explains_that_keyless_messages_spread() -> None:
    e = explain_subscription(read_subscription(held(), SUB), keys=["", "key-7"])
    assert [k.keyless for k in e.keys] == [True, False]
    assert e.keys[0].hash == sticky_key_hash("")
    text = run(str(HELD), "--subscription", SUB, "--key", "")
    assert "'' (no key): a message without key or ordering key has the sticky key" in text
    assert "producerName-sequenceId" in text
    placed = run(str(HELD), "--subscription", SUB, "--keyless", "p-1", "7", "--json")
    answer = json.loads(placed)["keys"][0]
    assert (answer["key"], answer["hash"]) == ("p-1-7", sticky_key_hash("p-1-7"))
    assert answer["owner"] == owner_by_ranges(held(), "p-1-7")


# --- shown names and keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "printed"),
    [
        ("plain", "plain"),
        ("a\tb", "'a\\tb'"),
        ("\x1b[31mred", "'\\x1b[31mred'"),
        ("x\ny", "'x\\ny'"),
        ("", "''"),
        (" pad", "' pad'"),
        ("\u2028", "'\\u2028'"),
        ("k" * 50, "k" * 40 + "…(50 chars)"),
    ],
)
def test_odd_keys_and_names_are_printed_escaped_and_short(raw: str, printed: str) -> None:
    from keyshared.explain.stats import shown

    assert shown(raw) == printed


def test_client_chosen_names_cannot_reach_the_terminal_raw() -> None:
    stats = held()
    consumers = stats["subscriptions"][SUB]["consumers"]
    consumers[3]["consumerName"] = "evil\x1b[2J\nnewcomer  0  0.0%"
    text = run_stats(stats, "--key", "a\tb\x1b]0;x\x07")
    assert "\x1b" not in text and "\x07" not in text and "\t" not in text
    assert not any(line.startswith("newcomer  0") for line in text.splitlines())
    assert "'evil\\x1b[2J\\nnewcomer  0  0.0%' takes no messages" in text


def run_stats(stats: Any, *argv: str) -> str:
    out = io.StringIO()
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stats.json"
        path.write_text(json.dumps(stats))
        assert main(["explain", str(path), "--subscription", SUB, *argv], out=out) == 0
    return out.getvalue()


def test_the_default_shows_range_counts_and_ranges_on_request() -> None:
    text = run(str(HELD), "--subscription", SUB)
    assert "ranges (inclusive)" not in text
    assert max(len(line) for line in text.splitlines()) < 300
    sub = read_subscription(held(), SUB)
    old_0 = sub.consumer("old-0")
    start, end = max(old_0.ranges, key=lambda r: (r[1] - r[0], -r[0]))
    row = next(line for line in text.splitlines() if line.startswith("old-0 "))
    assert f"[{start}, {end}]" in row and f" {len(old_0.ranges)} " in row
    full = run(str(HELD), "--subscription", SUB, "--ranges")
    assert "ranges (inclusive)" in full
    assert " ".join(f"[{a}, {b}]" for a, b in old_0.ranges) in full


# --- key files ------------------------------------------------------------------------------


def test_key_files_split_lines_only_at_newlines(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    odd = ["a\u2028b", "c\x85d", "e\x1cf", "g\vh", "i\x0cj", "k\rl"]
    path.write_bytes(("\n".join(odd[:3]) + "\r\n" + "\n".join(odd[3:]) + "\n").encode())
    assert load_keys(path) == dict.fromkeys(odd, 1)


def test_a_csv_is_read_whatever_the_case_of_its_suffix(tmp_path: Path) -> None:
    for name in ("KEYS.CSV", "keys.Csv"):
        path = tmp_path / name
        path.write_text("key,count\r\na,3\r\nb\r\n")
        assert load_keys(path) == {"a": 3, "b": 1}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # A first row whose count is not a number is a header.
        ("a,²\nb,²\n", r"KEYS\.csv:2: count '²' is not an integer"),
        ("a,1\nb," + "9" * 400 + "\n", r"KEYS\.csv:2 count must be <= 9007199254740992"),
        ("a,1\nb,1e400\n", r"KEYS\.csv:2: count '1e400' is not an integer"),
        ("a,-1\n", r"KEYS\.csv:1 count must be >= 0"),
    ],
)
def test_bad_counts_name_the_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "KEYS.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_keys(path)


def test_non_utf8_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_bytes(b"good\n\xff\xfebad\n")
    with pytest.raises(ValueError, match=r"keys\.txt: not UTF-8 \(byte 0xff at offset 5\)"):
        load_keys(keys)
    stats = tmp_path / "stats.json"
    stats.write_bytes(b'{"subscriptions": "\xc3"}')
    assert main(["explain", str(stats), "--subscription", SUB]) == 2
    assert "stats.json: not UTF-8 text: bytes c3 at offset 19" in capsys.readouterr().err


# --- issue 29's edges ----------------------------------------------------------------------


def test_labels_stay_unique_for_a_a_and_a1() -> None:
    sub = read_subscription(ring_stats(["a", "a", "a#1"]), SUB)
    labels = [c.label for c in sub.consumers]
    assert labels == ["a#0", "a#1#1", "a#1"] and len(set(labels)) == 3
    assert sub.consumer("a#1").name == "a#1" and sub.consumer("a#1#1").index == 1
    e = explain_subscription(sub, join="a#1")
    assert e.what_if is not None and e.what_if.consumer == "a#1#3"
    assert len({s.consumer for s in e.what_if.shares_after}) == 4


@pytest.mark.parametrize(
    ("sample", "error", "message"),
    [
        ({"k": -5}, ValueError, r"sample\['k'\] must be >= 0, got -5"),
        ({"k": 1.5}, TypeError, r"sample\['k'\] must be an int, got float"),
        ({"k": 2**60}, ValueError, r"sample\['k'\] must be <= 9007199254740992"),
        ({1: 1}, TypeError, r"sample key 1 must be a str"),
        ([("k", 1)], TypeError, r"sample must be a mapping"),
    ],
)
def test_a_bad_sample_is_refused(sample: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        explain_subscription(read_subscription(held(), SUB), sample=sample)


def test_a_lone_str_of_keys_is_refused() -> None:
    sub = read_subscription(held(), SUB)
    with pytest.raises(TypeError, match="keys must be a sequence of str, got one str"):
        explain_subscription(sub, keys="order-1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"keys\[1\] must be a str, got int"):
        explain_subscription(sub, keys=["a", 1])  # type: ignore[list-item]


@pytest.mark.parametrize("value", ["{}", "0", "false", '""', "7", '"x"'])
def test_draining_hashes_that_are_not_a_list_are_refused(value: str) -> None:
    stats = broken(f"subscriptions.sub.consumers.2.drainingHashes={value}")
    with pytest.raises(TypeError, match=r"consumers\[2\]\.drainingHashes must be a list"):
        read_subscription(stats, SUB)
    stats = broken("subscriptions.sub.consumers.2.drainingHashes=null")
    assert read_subscription(stats, SUB).consumers[2].draining_hashes == ()


# --- the picture ---------------------------------------------------------------------------


def test_the_consumer_picture_marks_who_holds_waits_and_takes_nothing(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from keyshared.explain.plot import consumer_figure, plot_consumers

    stats = held()
    e = explain_subscription(read_subscription(stats, SUB))
    fig, bars = consumer_figure(e)
    try:
        consumers = stats["subscriptions"][SUB]["consumers"]
        assert [b.consumer for b in bars] == [c["consumerName"] for c in consumers]
        for c, b in zip(consumers, bars, strict=True):
            assert b.holds == len(c["drainingHashes"])
            assert b.available_permits == c["availablePermits"]
            assert b.unacked_messages == c["unackedMessages"]
            assert b.stuck == (c["availablePermits"] <= 0)
            assert b.hash_share == sum(e - s + 1 for s, e in c["keyHashRangeArrays"]) / HASH_COUNT
        assert {b.consumer: b.waits_for for b in bars}["newcomer"] == sum(
            len(c["drainingHashes"]) for c in consumers
        )
        assert [b.consumer for b in bars if b.never_drains] == ["stuck"]
        # What is drawn is what the bars say: lengths, colors, notes and names.
        ax = fig.axes[0]
        patches = ax.patches
        assert [p.get_width() for p in patches] == pytest.approx([100 * b.hash_share for b in bars])
        from matplotlib.colors import to_rgba

        assert [p.get_facecolor() for p in patches] == [to_rgba(b.color) for b in bars]
        texts = [t.get_text() for t in ax.texts]
        assert texts == [b.note for b in bars]
        assert "TAKES NONE: no permits" in texts[3] and "WILL NOT DRAIN" in texts[3]
        assert [t.get_text() for t in ax.get_yticklabels()] == [b.consumer for b in bars]
    finally:
        plt.close(fig)
    png = tmp_path / "consumers.png"
    assert plot_consumers(e, png) == bars
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_consumer_picture_marks_the_holders_and_titles_the_whole_verdict() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    from keyshared.explain.plot import HOLDER_COLOR, STUCK_COLOR, TAKING_COLOR, consumer_figure

    e = explain_subscription(read_subscription(held(), SUB))
    assert e.verdict is not None
    # The verdict says that newcomer waits for hashes held by the three old consumers, which
    # take messages but never ack, and by stuck, which takes none.
    holders = {w.holder for w in e.verdict.waits}
    assert holders == {"old-0", "old-1", "old-2", "stuck"}
    fig, bars = consumer_figure(e)
    try:
        ax = fig.axes[0]
        colors = {b.consumer: p.get_facecolor() for b, p in zip(bars, ax.patches, strict=True)}
        want = {"old-0": HOLDER_COLOR, "old-1": HOLDER_COLOR, "old-2": HOLDER_COLOR}
        want |= {"stuck": STUCK_COLOR, "newcomer": TAKING_COLOR}
        assert colors == {name: to_rgba(color) for name, color in want.items()}
        legend = ax.get_legend()
        assert legend is not None
        assert [t.get_text() for t in legend.get_texts()] == [
            "takes messages",
            "holds hashes a consumer waits for",
            "takes no messages",
        ]
        assert [to_rgba(h.get_facecolor()) for h in legend.legend_handles] == [
            to_rgba(c) for c in (TAKING_COLOR, HOLDER_COLOR, STUCK_COLOR)
        ]
        # Every line of the verdict, wrapped at spaces: every word is there, in order.
        title = ax.get_title(loc="left")
        assert len(e.verdict.lines) == 4
        assert title.split() == " ".join(e.verdict.lines).split()
        assert "old-0, old-1, old-2: never acked since it connected" in title
        assert "close or restart their holder(s)" in title
        assert max(len(line) for line in title.splitlines()) <= 120
    finally:
        plt.close(fig)


def test_the_ring_is_drawn_only_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "ring.png"
    run(str(HELD), "--subscription", SUB, "--png", str(png), "--ring")
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["explain", str(HELD), "--subscription", SUB, "--ring"]) == 2
    assert "--ring needs --png" in capsys.readouterr().err


# --- watching ------------------------------------------------------------------------------


def test_watch_prints_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stats = held()
    path = tmp_path / "stats.json"
    path.write_text(json.dumps(stats))
    consumers = stats["subscriptions"][SUB]["consumers"]
    steps = []
    # First the stuck consumer starts receiving and acking; then everything drains.
    recovering = json.loads(json.dumps(stats))
    stuck = recovering["subscriptions"][SUB]["consumers"][3]
    stuck.update(availablePermits=5, lastAckedTimestamp=1795620490000, unackedMessages=0)
    stuck.update(drainingHashes=[])
    recovering["subscriptions"][SUB]["msgInReplay"] = 120
    steps.append(recovering)
    drained = json.loads(json.dumps(recovering))
    for c in drained["subscriptions"][SUB]["consumers"]:
        c["drainingHashes"] = []
    steps.append(drained)

    def next_stats(seconds: float) -> None:
        assert seconds == 2.5
        path.write_text(json.dumps(steps.pop(0)))

    monkeypatch.setattr("keyshared.explain.command._sleep", next_stats)
    text = run(str(path), "--subscription", SUB, "--watch", "2.5", "--count", "2")
    assert not steps
    first, second = text.split("\n+")[1:]
    assert "2 hash(es) drained: stuck 2" in first
    assert "stuck started acking (0 unacked now)" in first
    assert "stuck takes messages again (availablePermits 5)" in first
    assert "messages in replay: 160 -> 120" in first
    held_by = {c["consumerName"]: len(c["drainingHashes"]) for c in consumers[:3]}
    assert "29 hash(es) drained: " + ", ".join(f"{n} {k}" for n, k in held_by.items()) in second


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--watch", "nan"], "--watch must be a finite number of seconds > 0, got nan"),
        (["--watch", "0"], "--watch must be a finite number of seconds > 0, got 0.0"),
        (["--count", "2"], "--count needs --watch"),
        (["--watch", "1", "--count", "0"], "--count must be >= 1, got 0"),
        (["--timeout", "nan"], "--timeout must be a finite number of seconds > 0, got nan"),
        (["--timeout", "-1"], "--timeout must be a finite number of seconds > 0, got -1.0"),
        (["--timeout", "inf"], "--timeout must be a finite number of seconds > 0, got inf"),
        (["--timeout", "1e300"], "--timeout must be at most 31536000 seconds (a year), got 1e+300"),
        (["--watch", "1e300"], "--watch must be at most 31536000 seconds (a year), got 1e+300"),
        (["--max-unacked", "-3"], "--max-unacked must be >= 0, got -3"),
    ],
)
def test_bad_timings_are_refused_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(HELD), "--subscription", SUB, *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_library_refuses_a_timeout_beyond_a_year_as_the_command_does() -> None:
    from keyshared.errors import InvalidArgument
    from keyshared.explain.admin import http_get

    with pytest.raises(InvalidArgument, match=r"timeout must be at most 31536000 seconds"):
        http_get("http://127.0.0.1:9/", timeout_s=1e300)


# --- sources ------------------------------------------------------------------------------


def test_deeply_nested_json_and_a_closed_stdin_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    assert main(["explain", str(deep), "--subscription", SUB]) == 2
    assert "deep.json: JSON nested too deeply" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", None)
    assert main(["explain", "-", "--subscription", SUB]) == 2
    assert "<stdin> is closed" in capsys.readouterr().err
    closed = io.TextIOWrapper(io.BytesIO(b"{}"))
    closed.close()
    monkeypatch.setattr("sys.stdin", closed)
    assert main(["explain", "-", "--subscription", SUB]) == 2
    assert "<stdin> is closed" in capsys.readouterr().err


class FakeAdmin:
    """An admin endpoint on 127.0.0.1 answering each path from ``routes``: (status, body,
    seconds between bytes)."""

    def __init__(self, routes: dict[str, tuple[int, bytes, float]]) -> None:
        import http.server
        import threading
        import time

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, pause = routes.get(self.path, (404, b"", 0.0))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(pause)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


BASE = "/admin/v2/persistent/public/default"


def test_the_timeout_bounds_the_whole_request(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    admin = FakeAdmin({f"{BASE}/slow/stats": (200, b'{"subscriptions": {}}' * 4, 0.2)})
    try:
        started = time.monotonic()
        argv = ["explain", "--url", admin.url, "--topic", "slow", "--subscription", SUB]
        assert main([*argv, "--timeout", "1"]) == 2
        assert time.monotonic() - started < 2.5
        assert f"{admin.url}{BASE}/slow/stats: no complete answer within 1 s" in (
            capsys.readouterr().err
        )
    finally:
        admin.close()


def test_a_partitioned_base_name_names_its_partitions_and_bodies_are_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = FakeAdmin(
        {
            f"{BASE}/parted/partitions": (200, b'{"partitions": 3}', 0.0),
            f"{BASE}/binary/stats": (200, b'{"x": "\xff"}', 0.0),
        }
    )
    try:
        argv = ["explain", "--url", admin.url, "--subscription", SUB, "--topic"]
        assert main([*argv, "parted"]) == 2
        err = capsys.readouterr().err
        assert f"{admin.url}{BASE}/parted/stats: HTTP 404" in err
        assert "persistent://public/default/parted is a partitioned topic of 3 partition(s)" in err
        assert "parted-partition-0 to persistent://public/default/parted-partition-2" in err
        assert "--all-partitions" in err
        assert main([*argv, "binary"]) == 2
        assert f"{admin.url}{BASE}/binary/stats: not UTF-8 text: bytes ff at offset 7" in (
            capsys.readouterr().err
        )
        assert main([*argv, "lonely"]) == 2
        err = capsys.readouterr().err
        assert "HTTP 404" in err and "partition" not in err
    finally:
        admin.close()


def test_every_answer_that_takes_a_sample_checks_it() -> None:
    from keyshared.explain.answers import shares, what_if

    sub = read_subscription(held(), SUB)
    with pytest.raises(ValueError, match=r"sample\['k'\] must be >= 0, got -5"):
        shares(sub, {"k": -5})
    with pytest.raises(ValueError, match=r"sample\['k'\] must be >= 0, got -5"):
        what_if(sub, leave="old-0", sample={"k": -5})
    assert shares(sub, {"k": 0})[0].traffic_share in (0.0, None)

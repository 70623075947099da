"""Ids and the clock: 32-hex ids, strictly monotonic envelope ids, fixed-width sortable ISO-Z times."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ag2net.ids import (
    IdMint,
    IdSource,
    ManualClock,
    MonotonicIds,
    add_seconds,
    format_time,
    is_id,
    make_id,
    parse_time,
    seconds_between,
    utc_now,
)

ISO_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
FROZEN_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def test_make_id_is_32_lowercase_hex_and_distinct() -> None:
    ids = {make_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def test_make_id_starts_with_the_time() -> None:
    before = time.time_ns()
    ident = make_id()
    after = time.time_ns()
    assert before <= int(ident[:16], 16) <= after


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0123456789abcdef0123456789abcdef", True),
        ("0123456789ABCDEF0123456789ABCDEF", False),
        ("0123456789abcdef0123456789abcde", False),
        ("0123456789abcdef0123456789abcdef0", False),
        ("g123456789abcdef0123456789abcdef", False),
        ("", False),
        (None, False),
        (123, False),
    ],
)
def test_is_id(value: object, expected: bool) -> None:
    assert is_id(value) is expected


def test_monotonic_ids_strictly_increase_under_a_frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: FROZEN_NS)
    mint = MonotonicIds()
    ids = [mint() for _ in range(500)]
    assert ids == sorted(ids) and len(set(ids)) == 500
    assert all(is_id(i) for i in ids)
    # the time prefix advances by one nanosecond per id when the clock stands still
    assert [int(i[:16], 16) for i in ids] == list(range(FROZEN_NS, FROZEN_NS + 500))


def test_monotonic_ids_survive_a_clock_moving_back(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [FROZEN_NS]
    monkeypatch.setattr(time, "time_ns", lambda: now[0])
    mint = MonotonicIds()
    first = mint()
    now[0] -= 10**9
    second = mint()
    assert second > first
    now[0] += 5 * 10**9
    third = mint()
    assert third > second and int(third[:16], 16) == now[0]


def test_observe_never_mints_at_or_below_a_stored_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: FROZEN_NS)
    stored = (FROZEN_NS + 10**9).to_bytes(8, "big").hex() + "ff" * 8
    mint = MonotonicIds()
    mint.observe(stored)
    mint.observe("not-an-id")  # ignored
    mint.observe((FROZEN_NS - 5).to_bytes(8, "big").hex() + "00" * 8)  # older: ignored
    assert mint() > stored


def test_monotonic_ids_are_unique_across_threads() -> None:
    mint = MonotonicIds()
    out: list[list[str]] = [[] for _ in range(4)]

    def work(bucket: list[str]) -> None:
        for _ in range(500):
            bucket.append(mint())

    threads = [threading.Thread(target=work, args=(b,)) for b in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [i for bucket in out for i in bucket]
    assert len(set(everything)) == 2000
    assert len({i[:16] for i in everything}) == 2000  # distinct time prefixes, not just random tails
    for bucket in out:
        assert bucket == sorted(bucket)


def test_utc_now_is_fixed_width_iso_z() -> None:
    now = utc_now()
    assert ISO_Z.fullmatch(now), now
    assert len(now) == 27
    assert abs((parse_time(now) - datetime.now(UTC)).total_seconds()) < 5


def test_format_time_pads_microseconds_and_converts_to_utc() -> None:
    assert format_time(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000000Z"
    assert format_time(datetime(2026, 11, 29, 20, 53, 59, 53435, tzinfo=UTC)) == "2026-11-29T20:53:59.053435Z"
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2026, 1, 1, 2, 0, 0, 5, tzinfo=plus_two)) == "2026-01-01T00:00:00.000005Z"


_moments = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_moments, min_size=2, max_size=10))
def test_iso_strings_sort_in_time_order_and_round_trip(moments: list[datetime]) -> None:
    strings = [format_time(m) for m in moments]
    assert all(len(s) == 27 and ISO_Z.fullmatch(s) for s in strings)
    assert sorted(strings) == [format_time(m) for m in sorted(moments)]
    assert [parse_time(s) for s in strings] == moments


def test_parse_time_accepts_z_offset_and_naive() -> None:
    expected = datetime(2026, 11, 29, 20, 53, 59, 53435, tzinfo=UTC)
    assert parse_time("2026-11-29T20:53:59.053435Z") == expected
    assert parse_time("2026-11-29T20:53:59.053435+00:00") == expected
    assert parse_time("2026-11-29T20:53:59.053435") == expected
    assert parse_time("2026-11-29T21:53:59.053435+01:00") == expected
    with pytest.raises(ValueError):
        parse_time("yesterday")


def test_add_seconds_and_seconds_between() -> None:
    t0 = "2026-01-01T00:00:00.000000Z"
    assert add_seconds(t0, 90) == "2026-01-01T00:01:30.000000Z"
    assert add_seconds(t0, 0.25) == "2026-01-01T00:00:00.250000Z"
    assert add_seconds(t0, -1) == "2025-12-31T23:59:59.000000Z"
    assert add_seconds("2026-01-01T00:00:00+00:00", 7200) == "2026-01-01T02:00:00.000000Z"
    assert seconds_between(t0, "2026-01-01T00:01:30.500000Z") == 90.5
    assert seconds_between("2026-01-01T00:01:30.500000Z", t0) == -90.5
    assert seconds_between(t0, "2026-01-01T00:00:00+00:00") == 0


def test_manual_clock() -> None:
    clock = ManualClock()
    assert clock() == "2026-01-01T00:00:00.000000Z"
    assert clock() == clock()
    clock.advance(61.5)
    assert clock() == "2026-01-01T00:01:01.500000Z"
    clock.set("2030-06-01T12:00:00+00:00")
    assert clock() == "2030-06-01T12:00:00.000000Z"
    assert ManualClock("2026-05-05T05:05:05.000005Z")() == "2026-05-05T05:05:05.000005Z"


def test_seeded_mints_repeat_and_differ_by_seed() -> None:
    a, b, c = IdMint.seeded(7), IdMint.seeded(7), IdMint.seeded(8)
    first = [a.new_id(), a.new_envelope_id(), a.new_id()]
    assert first == [b.new_id(), b.new_envelope_id(), b.new_id()]
    assert first != [c.new_id(), c.new_envelope_id(), c.new_id()]
    assert all(is_id(i) for i in first)


def test_a_mint_with_a_standing_clock_still_mints_increasing_envelope_ids() -> None:
    mint = IdMint(time_ns=lambda: FROZEN_NS, randbytes=lambda n: b"\x00" * n)
    ids = [mint.new_envelope_id() for _ in range(100)]
    assert ids == sorted(set(ids))
    assert mint.last_envelope_id()[:16] == ids[-1][:16]
    stored = (FROZEN_NS + 10**9).to_bytes(8, "big").hex() + "ff" * 8
    mint.observe(stored)
    assert mint.new_envelope_id() > stored
    assert isinstance(mint, IdSource)


async def test_a_hub_takes_its_ids_from_the_source_it_is_handed(tmp_path) -> None:
    from ag2net import Hub, HubClient, Passport

    async def run(path) -> list[str]:
        hub = await Hub.open(path, ids=IdMint.seeded(42), ttl_sweep_interval=0, expectation_sweep_interval=0)
        try:
            hc = HubClient.local(hub)
            a = await hc.register_human(Passport(name="a", kind="human"))
            b = await hc.register_human(Passport(name="b", kind="human"))
            channel = await a.open(type="conversation", target="b")
            envelope_id = await a.send(channel.channel_id, "hi")
            return [a.agent_id, b.agent_id, channel.channel_id, envelope_id]
        finally:
            await hub.close()

    first = await run(tmp_path / "one.db")
    assert first == await run(tmp_path / "two.db")
    assert len(set(first)) == 4 and all(is_id(i) for i in first)
    # a restarted hub with the same seed never mints at or below what it stored
    hub = await Hub.open(
        tmp_path / "one.db", ids=IdMint.seeded(42), ttl_sweep_interval=0, expectation_sweep_interval=0
    )
    try:
        assert hub.ids.new_envelope_id() > first[3]
    finally:
        await hub.close()

"""Views: the seed's custom view, the four built-ins, WAL prefixes, the registry and view resolution."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ag2net.adapters import ConsultingAdapter, ConversationAdapter, DiscussionAdapter, WorkflowAdapter
from ag2net.channel import ChannelManifest, ChannelMetadata, ChannelState, Participant, ParticipantRole
from ag2net.envelope import EV_CHANNEL_OPENED, EV_PACKET, EV_TEXT, Envelope, visible_to
from ag2net.errors import ProtocolError
from ag2net.events import BaseEvent, CompactionSummary, ModelMessage, ModelRequest, TextInput
from ag2net.views import (
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    ViewPolicy,
    WalLog,
    WalSlice,
    WindowedSummary,
    default_name_resolver,
    get_view,
    register_view,
    registered_views,
    resolve_view,
    unregister_view,
    validate_view_knobs,
    view_from_spec,
    view_spec,
)

BUILTINS = [FullTranscript(), NamedTranscript(), WindowedSummary(2), NamedWindowedSummary(2)]


def exact(message: str) -> str:
    """A pattern matching exactly ``message``."""
    return "^" + re.escape(message) + "$"


def text(sender: str, body: str, audience: list[str] | None = None, eid: str = "") -> Envelope:
    return Envelope("c1", sender, audience, EV_TEXT, {"text": body}, envelope_id=eid)


def render(env: Envelope) -> str | None:
    if env.event_type != EV_TEXT:
        return None
    value = env.event_data.get("text")
    return value if isinstance(value, str) else None


def metadata(ids=("A", "B", "C"), knobs=None) -> ChannelMetadata:
    return ChannelMetadata(
        channel_id="c1",
        manifest=ChannelManifest(type="discussion"),
        creator_id=ids[0],
        participants=[
            Participant(a, ParticipantRole.INITIATOR if i == 0 else ParticipantRole.PARTICIPANT, i)
            for i, a in enumerate(ids)
        ],
        state=ChannelState.ACTIVE,
        created_at="t",
        knobs=knobs or {},
    )


async def project(view, wal, pid, name_for=default_name_resolver, render_envelope=render):
    return await view.project(
        wal, participant_id=pid, channel=metadata(), render_envelope=render_envelope, name_for=name_for
    )


# --- the seed's custom view, as written (imports adjusted) ---------------------------------------------
def _seed_from_one_only():
    from ag2net.envelope import EV_TEXT
    from ag2net.events import ModelMessage, ModelRequest, TextInput
    from ag2net.views import ViewPolicy

    class FromOneOnly(ViewPolicy):
        """Show only envelopes from a single named sender."""

        name = "from_one_only"

        def __init__(self, sender_id: str) -> None:
            self.sender_id = sender_id

        async def project(
            self,
            wal,
            *,
            participant_id,
            channel,
            render_envelope,  # required by the protocol
            name_for=lambda agent_id: agent_id,
        ):
            out: list[BaseEvent] = []
            for env in wal:
                if env.event_type != EV_TEXT or env.sender_id != self.sender_id:
                    continue
                text = render_envelope(env)  # adapter renders the envelope to a string (or None)
                if text is None:
                    continue
                out.append(
                    ModelMessage(text) if env.sender_id == participant_id else ModelRequest([TextInput(text)])
                )
            return out

    return FromOneOnly


async def test_seed_custom_view_runs_unchanged():
    FromOneOnly = _seed_from_one_only()
    view = FromOneOnly("B")
    assert isinstance(view, ViewPolicy)
    adapter = ConversationAdapter()
    wal = [text("A", "hi"), text("B", "hello"), text("C", "yo"), text("B", "again")]
    out = await view.project(
        wal, participant_id="A", channel=metadata(), render_envelope=adapter.render_envelope
    )
    assert out == [ModelRequest([TextInput("hello")]), ModelRequest([TextInput("again")])]
    mine = await view.project(
        wal, participant_id="B", channel=metadata(), render_envelope=adapter.render_envelope
    )
    assert mine == [ModelMessage("hello"), ModelMessage("again")]
    # a registered custom view resolves from a channel knob like a built-in
    register_view("from_one_only", FromOneOnly, replace=True)
    try:
        resolved = resolve_view(
            metadata(knobs={"view_policy": {"name": "from_one_only", "sender_id": "B"}}), "A", adapter
        )
        assert isinstance(resolved, FromOneOnly) and resolved.sender_id == "B"
        assert view_spec(resolved) == {"name": "from_one_only"}  # no params() method: none recorded
    finally:
        unregister_view("from_one_only")


# --- shared projection rules -----------------------------------------------------------------------
async def test_full_transcript_roles_and_audience():
    wal = [
        Envelope("c1", "A", None, EV_CHANNEL_OPENED, {"channel_id": "c1"}),
        text("A", "question"),
        text("B", "secret for C", audience=["C"]),
        text("B", "answer"),
        text("A", "", audience=[]),  # empty text still renders; an empty audience is the sender only
    ]
    out = await project(FullTranscript(), wal, "A")
    assert out == [ModelMessage("question"), ModelRequest([TextInput("answer")]), ModelMessage("")]
    out_c = await project(FullTranscript(), wal, "C")
    assert out_c == [
        ModelRequest([TextInput("question")]),
        ModelRequest([TextInput("secret for C")]),
        ModelRequest([TextInput("answer")]),
    ]


async def test_named_transcript_labels_other_speakers_only():
    wal = [text("a1", "hi"), text("b1", "hello"), text("c1", "hey")]
    names = {"a1": "alice", "b1": "bob", "c1": "carol"}.__getitem__
    out = await project(NamedTranscript(), wal, "b1", name_for=names)
    assert out == [
        ModelRequest([TextInput("[alice]: hi")]),
        ModelMessage("hello"),
        ModelRequest([TextInput("[carol]: hey")]),
    ]


async def test_windowed_summary_exact_text():
    wal = [text(s, f"m{i}") for i, s in enumerate("ABCAB")]
    out = await project(WindowedSummary(2), wal, "A")
    assert out == [
        CompactionSummary(summary="Earlier in this channel: 3 messages from A, B, C.", event_count=3),
        ModelMessage("m3"),
        ModelRequest([TextInput("m4")]),
    ]
    out = await project(WindowedSummary(4), wal, "A")
    assert out[0] == CompactionSummary(summary="Earlier in this channel: 1 message from A.", event_count=1)
    assert len(out) == 5
    # no more than recent_n visible rendered envelopes: same as the full transcript
    assert await project(WindowedSummary(5), wal, "A") == await project(FullTranscript(), wal, "A")


async def test_windowing_counts_visible_rendered_envelopes_only():
    wal = [
        text("B", "old"),
        Envelope("c1", "B", None, EV_CHANNEL_OPENED, {"channel_id": "c1"}),
        text("C", "hidden", audience=["B"]),
        text("B", "x"),
        text("C", "hidden2", audience=["B"]),
        text("A", "y"),
    ]
    out = await project(WindowedSummary(2), wal, "A")
    assert out == [
        CompactionSummary(summary="Earlier in this channel: 1 message from B.", event_count=1),
        ModelRequest([TextInput("x")]),
        ModelMessage("y"),
    ]


def test_recent_n_must_be_positive():
    with pytest.raises(ValueError, match=r"^recent_n must be >= 1, got 0$"):
        WindowedSummary(recent_n=0)
    with pytest.raises(ValueError, match=r"^recent_n must be >= 1, got -3$"):
        NamedWindowedSummary(recent_n=-3)
    with pytest.raises(ValueError, match=r"recent_n must be an integer"):
        WindowedSummary(recent_n="5")


async def test_named_windowed_summary_names_speakers():
    names = {"a1": "alice", "b1": "bob", "c1": "carol"}.__getitem__
    wal = [text("c1", "1"), text("a1", "2"), text("b1", "3"), text("a1", "4"), text("b1", "5")]
    out = await project(NamedWindowedSummary(2), wal, "b1", name_for=names)
    assert out == [
        CompactionSummary(
            summary="Earlier in this channel: 3 messages from alice, bob, carol.", event_count=3
        ),
        ModelRequest([TextInput("[alice]: 4")]),
        ModelMessage("5"),
    ]


async def test_built_ins_are_registered_with_params():
    assert {"full_transcript", "windowed_summary", "named_transcript", "named_windowed_summary"} <= set(
        registered_views()
    )
    assert view_spec(WindowedSummary(12)) == {"name": "windowed_summary", "recent_n": 12}
    assert view_spec(FullTranscript()) == {"name": "full_transcript"}
    assert view_from_spec({"name": "named_windowed_summary", "recent_n": 6}) == NamedWindowedSummary(6)
    assert view_from_spec("named_transcript") == NamedTranscript()
    assert get_view("windowed_summary").params() == {"recent_n": 10}
    view = WindowedSummary(3)
    assert view_from_spec(view) is view


# --- the registry ---------------------------------------------------------------------------------
def test_register_view_as_call_and_decorator():
    class Quiet:
        name = "quiet"

        async def project(self, wal, **kwargs):
            return []

    try:
        assert register_view("quiet", Quiet) is Quiet
        assert isinstance(get_view("quiet"), Quiet)

        @register_view("quiet2")
        def make_quiet2(**params) -> Quiet:
            return Quiet()

        assert isinstance(get_view("quiet2"), Quiet)
        register_view("quiet", Quiet)  # same factory again: fine
        with pytest.raises(ProtocolError, match=r"view 'quiet' is already registered; pass replace=True"):
            register_view("quiet", make_quiet2)
        register_view("quiet", make_quiet2, replace=True)
        assert "quiet" in registered_views() and "quiet2" in registered_views()
    finally:
        unregister_view("quiet")
        unregister_view("quiet2")
    assert "quiet" not in registered_views()


def test_unknown_and_bad_specs():
    with pytest.raises(ProtocolError) as err:
        get_view("x")
    assert str(err.value) == f"unknown view 'x'; choose from {registered_views()}"
    assert "'full_transcript'" in str(err.value)
    with pytest.raises(
        ProtocolError, match=r"view 'windowed_summary' rejected parameters .*recent_n must be >= 1"
    ):
        view_from_spec({"name": "windowed_summary", "recent_n": 0})
    with pytest.raises(ProtocolError, match=r"view 'full_transcript' rejected parameters"):
        view_from_spec({"name": "full_transcript", "recent_n": 3})
    with pytest.raises(ProtocolError, match=r"view spec needs a 'name'"):
        view_from_spec({"recent_n": 3})
    with pytest.raises(
        ProtocolError, match=r"view spec must be a view name, a dict with 'name', or a ViewPolicy"
    ):
        view_from_spec(12)


def test_resolve_view_order():
    adapter = DiscussionAdapter()
    md = metadata()
    assert resolve_view(md, "A", adapter) == NamedWindowedSummary(6)  # adapter default: max(2*3, 4)
    md.knobs = {"view_policy": {"name": "windowed_summary", "recent_n": 12}}
    assert resolve_view(md, "A", adapter) == WindowedSummary(12)
    md.knobs["view_policies"] = {"B": "full_transcript"}
    assert resolve_view(md, "B", adapter) == FullTranscript()
    assert resolve_view(md, "A", adapter) == WindowedSummary(12)
    md.knobs = {"view_policies": {"B": {"name": "named_transcript"}}}
    assert resolve_view(md, "A", adapter) == NamedWindowedSummary(6)
    assert resolve_view(md, "B", adapter) == NamedTranscript()


def test_resolve_view_bad_knobs_name_the_knob():
    adapter = ConsultingAdapter()
    bad = metadata(knobs={"view_policy": {"name": "nope"}})
    with pytest.raises(ProtocolError, match=r"^knob 'view_policy' is invalid: unknown view 'nope'"):
        resolve_view(bad, "A", adapter)
    with pytest.raises(ProtocolError, match=r"^knob 'view_policy' is invalid"):
        validate_view_knobs(bad.knobs)
    bad = metadata(knobs={"view_policies": {"B": {"name": "windowed_summary", "recent_n": -1}}})
    with pytest.raises(ProtocolError, match=r"^knob 'view_policies' for participant 'B' is invalid: view"):
        resolve_view(bad, "B", adapter)
    assert resolve_view(bad, "A", adapter) == FullTranscript()  # A's view does not depend on B's bad spec
    with pytest.raises(ProtocolError, match=r"for participant 'B' is invalid"):
        validate_view_knobs(bad.knobs)
    bad = metadata(knobs={"view_policies": ["B"]})
    with pytest.raises(
        ProtocolError, match=r"knob 'view_policies' must be a dict of participant id to view spec"
    ):
        resolve_view(bad, "A", adapter)
    with pytest.raises(ProtocolError, match=r"knob 'view_policies' must be a dict"):
        validate_view_knobs(bad.knobs)


def test_adapter_defaults():
    md2 = metadata(ids=("A", "B"))
    assert ConsultingAdapter().default_view_policy(md2, "A") == FullTranscript()
    assert ConversationAdapter().default_view_policy(md2, "A") == WindowedSummary(10)
    assert DiscussionAdapter().default_view_policy(md2, "A") == NamedWindowedSummary(4)
    assert WorkflowAdapter().default_view_policy(metadata(ids=tuple("ABCDE")), "A") == NamedWindowedSummary(
        10
    )


# --- WAL prefixes ------------------------------------------------------------------------------------
def test_wal_log_and_slice_behave_like_sequences():
    envs = [text("A", str(i), eid=f"e{i}") for i in range(5)]
    log = WalLog(envs[:3])
    log.extend(envs[3:])
    assert len(log) == 5 and list(log) == envs and log[1] is envs[1] and log[1:3] == envs[1:3]
    assert log.index_of("e3") == 3 and log.index_of("zz") is None
    s = log.until("e3")
    assert isinstance(s, WalSlice) and len(s) == 3 and s == envs[:3]
    assert list(reversed(s)) == envs[:3][::-1]
    assert s[-1] is envs[2] and s[0] is envs[0]
    with pytest.raises(IndexError):
        s[3]
    assert isinstance(s[:2], WalSlice) and s[:2] == envs[:2]
    assert s[1:] == envs[1:3] and s[::2] == envs[0:3:2]
    assert log.until("unknown") == envs
    assert log.prefix() == envs and log.prefix(2) == envs[:2] and log.prefix(-1) == envs[:4]
    assert log.prefix(99) == envs
    log.append(text("B", "later", eid="e5"))
    assert len(s) == 3  # a slice is fixed at its end; the log grew behind it
    with pytest.raises(ValueError, match=r"WalSlice end must be between 0 and 6"):
        WalSlice(log, 7)


async def test_windowed_views_on_a_log_cost_the_window_not_the_log():
    """After the first projection, each turn renders the window plus the envelopes appended since."""
    calls = 0

    def counting(env):
        nonlocal calls
        calls += 1
        return render(env)

    log = WalLog(text("ABC"[i % 3], f"m{i}", eid=f"e{i}") for i in range(5000))
    view = WindowedSummary(10)
    first = await project(view, log.prefix(), "A", render_envelope=counting)
    assert calls >= 5000  # the first projection for (participant, renderer) indexes the log once
    for i in range(5000, 5020):
        log.append(text("ABC"[i % 3], f"m{i}", eid=f"e{i}"))
        calls = 0
        out = await project(view, log.until(f"e{i}"), "A", render_envelope=counting)
        assert calls <= 10 + 1
        assert out == await project(view, list(log)[:i], "A")
    assert first[0] == CompactionSummary("Earlier in this channel: 4990 messages from A, B, C.", 4990)


async def test_log_index_survives_a_raising_renderer():
    log = WalLog([text("A", "ok"), text("B", "boom"), text("C", "fine")])

    def fragile(env):
        if env.event_data["text"] == "boom":
            raise RuntimeError("bad envelope")
        return render(env)

    with pytest.raises(RuntimeError):
        await project(WindowedSummary(1), log.prefix(), "A", render_envelope=fragile)
    with pytest.raises(RuntimeError):
        await project(WindowedSummary(1), log.prefix(), "A", render_envelope=fragile)
    out = await project(WindowedSummary(1), log.prefix(1), "A", render_envelope=fragile)
    assert out == [ModelMessage("ok")]


# --- properties --------------------------------------------------------------------------------------
PIDS = ["A", "B", "C"]


@st.composite
def wals(draw) -> list[Envelope]:
    n = draw(st.integers(0, 40))
    out = []
    for i in range(n):
        sender = draw(st.sampled_from(PIDS))
        audience = draw(st.none() | st.lists(st.sampled_from([*PIDS, "Z"]), max_size=3, unique=True))
        kind = draw(
            st.sampled_from([EV_TEXT, EV_TEXT, EV_TEXT, EV_PACKET, EV_CHANNEL_OPENED, "myapp.custom"])
        )
        token = f"tok{i}x"
        if kind == EV_TEXT:
            data = {"text": token}
        elif kind == EV_PACKET:
            data = {"body": token, "routing": {"kind": "handoff", "tool": "t", "reason": f"why{i}x"}}
        else:
            data = {"channel_id": "c1", "note": token}
        out.append(Envelope("c1", sender, audience, kind, data, envelope_id=f"e{i:04d}"))
    return out


def _texts(events: list[BaseEvent]) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, ModelMessage):
            out.append(e.content)
        elif isinstance(e, ModelRequest):
            out.extend(p.content for p in e.parts)
        elif isinstance(e, CompactionSummary):
            out.append(e.summary)
    return out


ALL_VIEWS = [
    FullTranscript(),
    NamedTranscript(),
    WindowedSummary(1),
    WindowedSummary(3),
    NamedWindowedSummary(2),
    NamedWindowedSummary(7),
]
RENDERERS = [ConversationAdapter().render_envelope, WorkflowAdapter().render_envelope]


@settings(max_examples=60, deadline=None)
@given(wals(), st.sampled_from(PIDS))
def test_no_projection_leaks_invisible_envelopes(wal, pid):
    visible_tokens = {f"tok{int(e.envelope_id[1:])}x" for e in wal if visible_to(e, pid)}
    hidden_tokens = {f"tok{int(e.envelope_id[1:])}x" for e in wal} - visible_tokens
    hidden_tokens |= {f"why{int(e.envelope_id[1:])}x" for e in wal if not visible_to(e, pid)}
    for renderer in RENDERERS:
        for view in ALL_VIEWS:
            out = asyncio.run(project(view, wal, pid, render_envelope=renderer, name_for=str.lower))
            joined = "\n".join(_texts(out))
            for token in hidden_tokens:
                assert token not in joined, (view, token)
            expected = [e for e in wal if visible_to(e, pid) and renderer(e) is not None]
            summaries = [e for e in out if isinstance(e, CompactionSummary)]
            if summaries:
                n = view.params()["recent_n"]
                assert summaries[0].event_count == len(expected) - n
                assert len(out) == n + 1
            else:
                assert len(out) == len(expected)


@settings(max_examples=60, deadline=None)
@given(wals(), st.lists(st.tuples(st.integers(0, 40), st.sampled_from(PIDS)), min_size=1, max_size=8))
def test_log_slices_project_exactly_like_lists(wal, queries):
    """Any order of prefixes (growing, shrinking) through one log's memo equals projecting plain lists."""
    log = WalLog()
    for end, pid in queries:
        while len(log) < min(end, len(wal)):
            log.append(wal[len(log)])
        end = min(end, len(log))
        for renderer in RENDERERS:
            for view in ALL_VIEWS:
                fast = asyncio.run(
                    project(view, log.prefix(end), pid, render_envelope=renderer, name_for=str.upper)
                )
                slow = asyncio.run(
                    project(view, wal[:end], pid, render_envelope=renderer, name_for=str.upper)
                )
                assert fast == slow

"""The agent view: every recorded turn (turn k of n, [ and ] to step), two turns compared (projection,
system prompt, tools offered), tool schemas wrapped, a legend for the agent ids a compaction summary
carries, nothing stale (after selecting all channels; a new turn or new envelopes re-project)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console
from textual import on
from textual.app import App, ComposeResult
from textual.widgets import Static, TabbedContent
from tui_network import close, small_network, until

from ag2net.events import ModelMessage, ModelRequest, TextInput
from tui.app import build_app
from tui.feed import FeedBatch, LiveFeed, TurnRecorded
from tui.settings import Settings
from tui.source import HubSource
from tui.widgets.projected_view import ProjectedView, diff_tools

SIZE = (160, 45)


def plain(renderable: Any, width: int = 100) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def shown(view: ProjectedView, selector: str, width: int = 100) -> str:
    return plain(view.query_one(selector, Static).content, width)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def planner_turns(network, count: int) -> None:
    """Ask the planner until it has recorded ``count`` turns on the conversation."""
    for i in range(count):
        turns = await network.hc.list_turns(
            channel_id=network.conversation, agent_id=network.planner.agent_id, limit=50
        )
        if len(turns) >= count:
            return
        calls = len(network.planner.agent.model.calls) + 1
        await network.human.send(network.conversation, f"and step {i + 2}?")
        await until(lambda calls=calls: len(network.planner.agent.model.calls) >= calls)
        await network.planner.idle()
    raise AssertionError(f"the planner did not record {count} turns")


async def test_every_turn_can_be_browsed_and_two_compared(network) -> None:
    await planner_turns(network, 3)
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.data is not None and len(view.data.turns) == 3)
        data = view.data
        assert data is not None and data.turn is not None
        assert view.turn_index == 2 and data.turn.turn_id == data.turns[-1].turn_id  # the newest
        assert [t.started_at for t in data.turns] == sorted(t.started_at for t in data.turns)
        view.query_one("#pv-tabs", TabbedContent).active = "pv-tab-turn"
        view.query_one("#pv-participant").focus()
        await pilot.pause()
        assert "Turn 3 of 3" in shown(view, "#pv-turn")
        await pilot.press("left_square_bracket")
        assert view.turn_index == 1
        assert "Turn 2 of 3" in shown(view, "#pv-turn")
        second = data.turns[1]
        # the older turn's re-projection is loaded, and the diff is against it
        await until(lambda: view.data is not None and view.data.turn.turn_id == second.turn_id)
        await pilot.pause()
        assert view.turn_index == 1 and view.turn_summary.startswith("identical")
        assert "Turn 2 of 3" in shown(view, "#pv-turn")
        await pilot.press("left_square_bracket", "left_square_bracket")  # stops at the first
        await until(lambda: view.data.turn.turn_id == data.turns[0].turn_id)
        assert view.turn_index == 0
        await pilot.press("right_square_bracket", "right_square_bracket")
        await until(lambda: view.turn_index == 2 and view.data.turn.turn_id == data.turns[2].turn_id)
        await pilot.press("d")
        await pilot.pause()
        assert view.query_one("#pv-tabs", TabbedContent).active == "pv-tab-compare"
        assert view.compare_summary.startswith("projection: ")
        compared = shown(view, "#pv-compare")
        assert "#2" in compared and "#3" in compared
        # turn 3 got turn 2's question and answer on top of what turn 2 got
        assert "+ user: and step 3?" in compared or "+ user: and step" in compared
        assert "tools: +0 −0 ~0" in view.compare_summary
        assert view.compare(0, 2)
        assert "#1" in shown(view, "#pv-compare")


async def test_selecting_all_channels_leaves_nothing_stale(network) -> None:
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.data is not None)
        assert "planner" in shown(view, "#pv-status")
        assert shown(view, "#pv-history").strip()
        app.channel_list.select(None)
        await pilot.pause()
        assert view.data is None and view.channel_id is None
        assert "Select a channel" in shown(view, "#pv-status")
        for selector in ("#pv-tokens", "#pv-history", "#pv-tools", "#pv-turn"):
            assert not shown(view, selector).strip(), selector


class ViewApp(App[None]):
    """The agent view over a real source and live feed, with the routing the workbench gives it."""

    def __init__(self, source: HubSource) -> None:
        super().__init__()
        self.source = source
        self.feed = LiveFeed(self, source, load_history=False)

    def compose(self) -> ComposeResult:
        yield ProjectedView(self.source.load_projection, name_for=self.source.name_for, id="view")

    def on_mount(self) -> None:
        self.feed.start()

    def on_unmount(self) -> None:
        self.feed.stop()

    @on(FeedBatch)
    def _batch(self, event: FeedBatch) -> None:
        self.query_one(ProjectedView).note_activity(event.seen)

    @on(TurnRecorded)
    def _turn(self, event: TurnRecorded) -> None:
        self.query_one(ProjectedView).note_turn(event.channel_id, event.agent_id)


async def test_a_new_turn_refreshes_the_view_without_r(network) -> None:
    """The critic has taken no turn yet: its system prompt is unknown (0 tokens). Once it answers, the
    view shows its turn and system prompt by itself (it used to stay at 0 until r)."""
    source = HubSource(network.hc, network.human)
    await source.load_channels()
    app = ViewApp(source)
    async with app.run_test(size=(90, 50)):
        view = app.query_one(ProjectedView)
        view.set_channel(network.discussion, source.participants(network.discussion)[::-1])
        view.select_participant(network.critic.agent_id)
        await until(lambda: view.data is not None and view.data.participant_id == network.critic.agent_id)
        assert view.data.preview.tokens["system"] == 0 and not view.data.turns
        await network.human.send(network.discussion, "Is the plan sound?")
        await network.critic.idle()
        await until(lambda: view.data is not None and len(view.data.turns) == 1, timeout=10)
        assert view.data.preview.tokens["system"] > 0
        assert "Turn 1 of 1" in shown(view, "#pv-turn")


async def test_tool_schemas_wrap_instead_of_being_cut(network) -> None:
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.data is not None and bool(view.data.preview.tools))
        view.query_one("#pv-tabs", TabbedContent).active = "pv-tab-tools"
        await pilot.pause()
        tools = view.query_one("#pv-tools", Static)
        scroll = tools.parent
        assert scroll is not None and tools.size.width > 0
        assert scroll.virtual_size.width <= scroll.size.width  # nothing to scroll sideways to
        text = shown(view, "#pv-tools", width=tools.size.width)
        assert max(len(line) for line in text.splitlines()) <= tools.size.width
        flat = "".join(text.split())
        for schema in view.data.preview.tools:
            description = schema["function"].get("description") or ""
            assert "".join(description.split()) in flat  # every word of it, wrapped, none cut off


async def test_raw_agent_ids_in_a_projection_get_a_legend(network) -> None:
    planner_id = network.planner.agent_id
    for text in ("one", "two", f"three, as {planner_id} asked"):
        await network.human.send(network.conversation, text)
    await until(lambda: len(network.planner.agent.model.calls) >= 4)
    await network.planner.idle()
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.data is not None)
        view.switch_view("windowed_summary", 2)
        await until(lambda: view.data.preview.view == {"name": "windowed_summary", "recent_n": 2})
        await pilot.pause()
        summary = view.data.preview.history[0]
        assert type(summary).__name__ == "CompactionSummary"
        # the compaction summary names its senders (name_for); an id a participant typed stays an id
        assert "ana" in summary.summary and network.human.agent_id not in summary.summary
        assert (planner_id, "planner") in view.legend
        history = shown(view, "#pv-history")
        assert planner_id in history
        assert "Agent ids in this text" in history and "= planner" in "".join(history.split(" \n"))


def test_tools_diff_by_name() -> None:
    def tool(name: str, **props: Any) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "parameters": {"properties": props}}}

    then = [tool("say", text={"type": "string"}), tool("delegate", target={"type": "string"}), tool("old")]
    now = [tool("say", text={"type": "string"}), tool("delegate", target={"type": "integer"}), tool("new")]
    diffs = {d.name: d for d in diff_tools(then, now)}
    assert {n: d.mark for n, d in diffs.items()} == {"say": " ", "delegate": "~", "new": "+", "old": "-"}
    assert any(line.startswith("-") and "string" in line for line in diffs["delegate"].lines)
    assert any(line.startswith("+") and "integer" in line for line in diffs["delegate"].lines)


def test_compare_renders_a_unified_diff_of_two_turns() -> None:
    from ag2net.client.turns import TurnRecord

    def turn(texts: list[str], system: str) -> TurnRecord:
        history: list[Any] = []
        for i, text in enumerate(texts):
            history.append(
                ModelRequest([TextInput(text)]) if i % 2 == 0 else ModelMessage(text)  # type: ignore[list-item]
            )
        return TurnRecord(
            channel_id="c" * 32,
            agent_id="a" * 32,
            trigger_envelope_id="e" * 32,
            started_at="2026-03-01T09:30:00.000000Z",
            system_prompt=system,
            history=history,
        )

    view = ProjectedView()
    text = plain(
        view._compare_renderable([turn(["q1"], "be brief"), turn(["q1", "a1", "q2"], "be kind")], 0, 1)
    )
    assert "+ assistant: a1" in text and "+ user: q2" in text and "  user: q1" in text
    assert "-be brief" in text and "+be kind" in text
    assert view.compare_summary.startswith("projection: 2 of 3 events differ")


async def test_the_workbench_refreshes_the_agent_view_when_a_turn_lands(network) -> None:
    """The same refresh through the real workbench's routing (FeedBatch.seen and TurnRecorded reach the
    agent view): the critic's view fills in once it has answered, without pressing r."""
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE):
        await until(lambda: app.ready)
        app.channel_list.select(network.discussion)
        view = app.projected_view
        await until(lambda: view.data is not None)
        view.select_participant(network.critic.agent_id)
        await until(lambda: view.data is not None and view.data.participant_id == network.critic.agent_id)
        assert not view.data.turns
        await network.human.send(network.discussion, "Is the plan sound?")
        await network.critic.idle()
        await until(lambda: view.data is not None and len(view.data.turns) == 1, timeout=10)
        assert view.data.preview.tokens["system"] > 0

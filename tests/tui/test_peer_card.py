"""PeerCard and PeersPane: front matter table, generated badge, parse errors, search by capability and text."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Markdown

from ag2net.identity import ObservedStat, Passport, Resume
from ag2net.skills import render_fallback_skill
from tui.widgets.peer_card import PeerInfo, PeersPane

SKILL = """---
title: Research Assistant
expertise: [policy, finance]
---

# Researcher

A senior policy analyst.
"""


def peers() -> list[PeerInfo]:
    researcher = Passport("researcher", owner="acme", model="scripted", agent_id="a" * 32)
    critic = Passport("critic", agent_id="b" * 32)
    ana = Passport("ana", kind="human", agent_id="c" * 32)
    critic_resume = Resume(["review"], summary="Reviews drafts")
    return [
        PeerInfo(
            researcher,
            Resume(["research"], ["finance"], "Finds sources", observed={"policy": ObservedStat(2, 2)}),
            SKILL,
        ),
        PeerInfo(critic, critic_resume, render_fallback_skill(critic, critic_resume), generated=True),
        PeerInfo(ana, Resume(), "---\ntitle: [unclosed\n---\nHello"),
    ]


class PeersApp(App[None]):
    def compose(self) -> ComposeResult:
        yield PeersPane()

    def on_mount(self) -> None:
        self.query_one(PeersPane).set_peers(peers())


async def test_card_shows_front_matter_fields_and_body() -> None:
    app = PeersApp()
    async with app.run_test(size=(90, 60)) as pilot:
        pane = app.query_one(PeersPane)
        assert pane.select("researcher")
        await pilot.pause()
        card = pane.card
        front = dict(card.frontmatter_rows)
        assert front == {"title": "Research Assistant", "expertise": "policy, finance"}
        fields = dict(card.field_rows)
        assert fields["owner"] == "acme" and fields["provider / model"] == "— / scripted"
        assert "research" in str(card.query_one("#peer-capabilities").render())
        assert "policy ✓2" in str(card.query_one("#peer-capabilities").render())
        assert "senior policy analyst" in card.query_one(Markdown).source
        assert not card.query("#peer-generated")


async def test_generated_badge_and_parse_error() -> None:
    app = PeersApp()
    async with app.run_test(size=(90, 60)) as pilot:
        pane = app.query_one(PeersPane)
        pane.select("critic")
        await pilot.pause()
        assert pane.card.query("#peer-generated")
        pane.select("ana")
        await pilot.pause()
        error = pane.card.query_one("#peer-error")
        assert "Front matter ignored" in str(error.render())
        assert dict(pane.card.frontmatter_rows) == {"—": "(none)"}


async def test_search_by_capability_kind_and_text() -> None:
    app = PeersApp()
    async with app.run_test(size=(90, 60)) as pilot:
        pane = app.query_one(PeersPane)
        pane.search("cap:review")
        await pilot.pause()
        assert [p.name for p in pane.shown] == ["critic"]
        assert pane.card.peer is not None and pane.card.peer.name == "critic"
        pane.search("cap:policy")  # observed capabilities count too
        assert [p.name for p in pane.shown] == ["researcher"]
        pane.search("kind:human")
        assert [p.name for p in pane.shown] == ["ana"]
        pane.search("senior analyst")
        assert [p.name for p in pane.shown] == ["researcher"]
        pane.search("nobody-has-this")
        await pilot.pause()
        assert pane.shown == [] and pane.card.peer is None


class PresenceApp(App[None]):
    def compose(self) -> ComposeResult:
        yield PeersPane()

    def on_mount(self) -> None:
        researcher, critic, ana = peers()
        researcher.online, critic.online = True, False  # ana: the hub did not say
        self.query_one(PeersPane).set_peers([researcher, critic, ana])


async def test_presence_shows_online_offline_and_unknown() -> None:
    app = PresenceApp()
    async with app.run_test(size=(90, 60)) as pilot:
        pane = app.query_one(PeersPane)
        assert "1 online" in str(pane.query_one("#peers-count").render())
        options = pane.query_one("#peers-list")
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        by_name = {label.lstrip("●○ ").split()[0]: label for label in labels}
        assert by_name["researcher"].startswith("● researcher")
        assert by_name["critic"].startswith("○ critic")
        assert by_name["ana"].startswith("ana")  # no mark: the hub did not say
        pane.select("researcher")
        await pilot.pause()
        assert str(pane.card.query_one("#peer-presence").render()) == "online"
        assert dict(pane.card.field_rows)["presence"].startswith("online")
        pane.select("critic")
        await pilot.pause()
        assert str(pane.card.query_one("#peer-presence").render()) == "offline"
        pane.select("ana")
        await pilot.pause()
        assert not pane.card.query("#peer-presence")
        assert dict(pane.card.field_rows)["presence"] == "not reported by this hub"
        pane.search("is:online")
        assert [p.name for p in pane.shown] == ["researcher"]
        pane.search("is:offline")
        assert [p.name for p in pane.shown] == ["critic"]

"""EnvelopeComposer validation, drafts and send flow; EnvelopeDetail visibility, causation and copy."""

from __future__ import annotations

import json
from pathlib import Path

from textual.app import App
from textual.widgets import Button, Input, Label, Select, SelectionList, TextArea

from ag2net.envelope import EV_TEXT, Envelope
from tui.screens.composer import ChannelChoice, EnvelopeComposer, event_templates, parse_event_data
from tui.widgets.envelope_detail import EnvelopeDetail, visibility_names

HUMAN = "h" * 32
PLANNER = "a" * 32
CRITIC = "b" * 32
CHANNEL = "c" * 32
NAMES = {HUMAN: "ana", PLANNER: "planner", CRITIC: "critic"}


class ComposerApp(App[None]):
    def __init__(self, draft_path: Path | None = None, refuse: str | None = None) -> None:
        super().__init__()
        self.draft_path = draft_path
        self.refuse = refuse
        self.sent: list[Envelope] = []

    def on_mount(self) -> None:
        channels = [ChannelChoice(CHANNEL, "conversation·cccc", [(PLANNER, "planner"), (CRITIC, "critic")])]
        self.push_screen(
            EnvelopeComposer(
                channels,
                HUMAN,
                recent_for=lambda channel_id: [("e" * 32, "#3 planner: hello")],
                draft_path=self.draft_path,
            )
        )

    def on_envelope_composer_send_requested(self, message: EnvelopeComposer.SendRequested) -> None:
        self.sent.append(message.envelope)
        if self.refuse:
            message.composer.show_send_error(self.refuse)
        else:
            message.composer.sent()


def message_of(screen: EnvelopeComposer, name: str) -> str:
    label = screen.query_one(f"#composer-{name}", Label)
    return "" if label.has_class("-empty") else str(label.render())


async def test_validation_blocks_sending_with_messages_beside_fields() -> None:
    app = ComposerApp()
    async with app.run_test(size=(130, 45)) as pilot:
        await pilot.pause()
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        composer.query_one("#composer-type", Input).value = ""
        composer.query_one("#composer-data", TextArea).load_text('{"text": "hi"')
        await pilot.pause()
        assert "event_type is empty" in message_of(composer, "type-msg")
        assert "not valid JSON" in message_of(composer, "data-msg")
        assert composer.query_one("#composer-send", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.sent == []

        composer.query_one("#composer-type", Input).value = "myapp.note"
        composer.query_one("#composer-data", TextArea).load_text("[1, 2]")
        await pilot.pause()
        assert message_of(composer, "type-msg") == ""
        assert "must be a JSON object, got an array" in message_of(composer, "data-msg")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.sent == []

        composer.query_one("#composer-ttl", Input).value = "-3"
        await pilot.pause()
        assert "ttl_seconds must be a whole number" in message_of(composer, "ttl-msg")


async def test_undotted_type_is_a_warning_not_an_error() -> None:
    app = ComposerApp(refuse="channel 'c' is closed (reason: done); open a new one")
    async with app.run_test(size=(130, 45)) as pilot:
        await pilot.pause()
        composer = app.screen
        composer.query_one("#composer-type", Input).value = "review"
        composer.query_one("#composer-data", TextArea).load_text('{"doc": 1}')
        await pilot.pause()
        assert "no dotted namespace" in message_of(composer, "type-warning")
        assert not composer.query_one("#composer-send", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert len(app.sent) == 1
        # the hub refused: the reason shows beside the form, the draft stays
        assert app.screen is composer
        assert "is closed" in composer.send_error
        assert composer.query_one("#composer-type", Input).value == "review"
        assert json.loads(composer.query_one("#composer-data", TextArea).text) == {"doc": 1}


async def test_every_field_reaches_the_envelope_as_entered() -> None:
    app = ComposerApp()
    async with app.run_test(size=(130, 45)) as pilot:
        await pilot.pause()
        composer = app.screen
        composer.query_one("#composer-audience", SelectionList).select(CRITIC)
        composer.query_one("#composer-type", Input).value = "myapp.review_request"
        composer.query_one("#composer-data", TextArea).load_text('{"document_id": "doc-9", "n": [1, 2]}')
        composer.query_one("#composer-priority", Select).value = "urgent"
        composer.query_one("#composer-causation", Select).value = "e" * 32
        composer.query_one("#composer-ttl", Input).value = "90"
        composer.query_one("#composer-task", Input).value = "task-7"
        await pilot.pause()
        preview = json.loads(composer.query_one("#composer-preview", TextArea).text)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert len(app.sent) == 1
        env = app.sent[0]
        assert env.to_dict() == preview
        assert (env.channel_id, env.sender_id, env.audience) == (CHANNEL, HUMAN, [CRITIC])
        assert env.event_type == "myapp.review_request"
        assert env.event_data == {"document_id": "doc-9", "n": [1, 2]}
        assert (env.priority, env.causation_id, env.ttl_seconds, env.task_id) == (
            "urgent",
            "e" * 32,
            90,
            "task-7",
        )
        assert app.screen is not composer  # admitted: the composer closed


async def test_templates_fill_type_and_data() -> None:
    app = ComposerApp()
    async with app.run_test(size=(130, 45)) as pilot:
        await pilot.pause()
        composer = app.screen
        composer.query_one("#composer-template", Select).value = "ag2.context.set"
        await pilot.pause()
        assert composer.query_one("#composer-type", Input).value == "ag2.context.set"
        data = json.loads(composer.query_one("#composer-data", TextArea).text)
        assert data == event_templates(CHANNEL, HUMAN)["ag2.context.set"]


async def test_draft_persists_between_openings(tmp_path: Path) -> None:
    draft = tmp_path / "composer-draft.json"
    app = ComposerApp(draft_path=draft)
    async with app.run_test(size=(130, 45)) as pilot:
        await pilot.pause()
        composer = app.screen
        composer.query_one("#composer-type", Input).value = "myapp.kept"
        composer.query_one("#composer-data", TextArea).load_text('{"kept": true}')
        await pilot.pause()
        await pilot.press("escape")
        await app.workers.wait_for_complete()
    assert json.loads(draft.read_text())["event_type"] == "myapp.kept"
    app = ComposerApp(draft_path=draft)
    async with app.run_test(size=(130, 45)) as pilot:
        await pilot.pause()
        composer = app.screen
        assert composer.query_one("#composer-type", Input).value == "myapp.kept"
        assert json.loads(composer.query_one("#composer-data", TextArea).text) == {"kept": True}


def test_parse_event_data_sentences() -> None:
    assert parse_event_data('{"a": 1}') == ({"a": 1}, "")
    assert "empty" in parse_event_data("  ")[1]
    assert "got a string" in parse_event_data('"x"')[1]
    big = json.dumps({"blob": "x" * (1024 * 1024)})
    assert "1 MiB" in parse_event_data(big)[1]


class DetailApp(App[None]):
    def __init__(self, envelope: Envelope) -> None:
        super().__init__()
        self.envelope = envelope
        self.opened: list[str] = []

    def on_mount(self) -> None:
        self.push_screen(
            EnvelopeDetail(self.envelope, seq=4, channel_label="conversation·cccc", name_for=NAMES.get)
        )

    def on_envelope_detail_open_requested(self, message: EnvelopeDetail.OpenRequested) -> None:
        self.opened.append(message.envelope_id)


async def test_detail_shows_visibility_follows_causation_and_copies() -> None:
    env = Envelope(
        CHANNEL,
        PLANNER,
        [CRITIC],
        EV_TEXT,
        {"text": "hi"},
        envelope_id="f" * 32,
        created_at="2026-01-01T10:00:00.000000Z",
        causation_id="e" * 32,
    )
    app = DetailApp(env)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        visibility = str(app.screen.query_one("#detail-visibility").render())
        assert "planner, critic" in visibility
        await pilot.press("o")
        await pilot.press("c")
        await pilot.pause()
        assert app.opened == ["e" * 32]
        assert json.loads(copied[0]) == env.to_dict()


def test_visibility_names() -> None:
    env = Envelope(CHANNEL, PLANNER, None, EV_TEXT, {"text": ""})
    assert visibility_names(env, NAMES.get, [HUMAN, PLANNER, CRITIC]) == (
        "every participant (broadcast)",
        ["ana", "planner", "critic"],
    )
    env.audience = []
    assert visibility_names(env, NAMES.get, None)[0] == "only the sender (empty audience)"

"""The workbench's actions on the hub: compose an envelope, fork a channel, open and close channels, take a
screenshot, start the demo, and the command palette's domain commands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.events import DeliveryFailed

from ag2net.envelope import Envelope
from ag2net.errors import NetworkError
from ag2net.views import registered_views
from tui.app_stepping import SteppingIn
from tui.commands import DomainCommand
from tui.formatting import preview
from tui.settings import screenshot_directory, screenshot_failure
from tui.widgets.projected_view import ProjectedView
from tui.wording import humanize, namer_for, plural

if TYPE_CHECKING:
    from tui.screens.composer import EnvelopeComposer
    from tui.screens.open_channel import OpenChannelForm

# The screens are imported when they open, not with the app: the first frame needs none of them. Their
# messages reach the app by handler name (``on_<screen>_<message>``), which needs no class up front.

DemoStarter = Callable[[], Awaitable[Any]]


class WorkbenchActions(SteppingIn):
    """The actions the keys and the palette run (a base of ``WorkbenchApp``)."""

    # ------------------------------------------------------------------ composer

    def action_compose_envelope(self) -> None:
        from tui.screens.composer import ChannelChoice, EnvelopeComposer

        # every channel, whatever the channels pane's filter shows, in the list's order
        ordered = list(dict.fromkeys([*self.channel_list.all_ids(), *self.source.metadata]))
        labels = self.channel_labels()
        choices = [
            ChannelChoice(cid, labels.get(cid) or self.source.label_for(cid), self.source.participants(cid))
            for cid in ordered
        ]
        if not choices:
            self.notify("There is no channel to post into yet; open one first (ctrl+o).", severity="warning")
            return
        self.push_screen(
            EnvelopeComposer(
                choices,
                self.source.human_id,
                initial_channel=self.current_channel,
                recent_for=self._recent_for,
                draft_path=self.settings.drafts_path,
                custom_types=sorted(self.feed.custom_types),
            )
        )

    def _recent_for(self, channel_id: str) -> list[tuple[str, str]]:
        return [
            (
                row.envelope.envelope_id,
                f"#{row.seq} {self.source.name_for(row.envelope.sender_id)}: {preview(row.envelope, 60)}",
            )
            for row in self.tail.recent_rows(channel_id, 25)
        ]

    def on_envelope_composer_send_requested(self, event: EnvelopeComposer.SendRequested) -> None:
        self._post_composed(event.composer, event.envelope)

    @work(group="composer")
    async def _post_composed(self, composer: EnvelopeComposer, envelope: Envelope) -> None:
        try:
            await self.source.post_envelope(envelope)
        except NetworkError as exc:
            composer.show_send_error(str(exc))
            return
        composer.sent()
        self.notify(
            f"Posted {envelope.event_type} into {self.channel_label(envelope.channel_id)}.", timeout=3
        )

    # ------------------------------------------------------------------ fork and replay

    def action_fork_here(self) -> None:
        row = self.tail.cursor_row
        if row is None or row.seq is None:
            self.notify(
                "Put the tail's cursor on an envelope to fork at (2, then up/down).", severity="warning"
            )
            return
        self.open_fork(row.envelope.channel_id, seq=row.seq)

    @on(ProjectedView.ForkRequested)
    def _fork_turn(self, event: ProjectedView.ForkRequested) -> None:
        self.open_fork(event.channel_id, envelope_id=event.envelope_id)

    def open_fork(self, channel_id: str, *, seq: int | None = None, envelope_id: str | None = None) -> None:
        """Open "Fork here…" on ``channel_id`` at ``seq`` (or at the seq of ``envelope_id``)."""
        from tui.screens.fork import ForkForm

        self.push_screen(ForkForm(self.source, channel_id, seq=seq, envelope_id=envelope_id))

    # ------------------------------------------------------------------ evaluate

    def action_evaluate(self) -> None:
        """Open Evaluate… over the channels the list shows, the selected one ticked (all when none is)."""
        from tui.screens.evaluate import EvaluateScreen

        shown = self.channel_list.shown_ids()
        if not shown:
            self.notify("No channel to evaluate yet: record some traffic first.", severity="warning")
            return
        selected = [self.selected_channel] if self.selected_channel in shown else None
        self.push_screen(EvaluateScreen(self.source, shown, selected=selected))

    # ------------------------------------------------------------------ open / close channels

    def action_open_channel(self) -> None:
        self._show_open_form()

    @work(group="open-form")
    async def _show_open_form(self) -> None:
        try:
            types = await self.source.channel_types()
        except NetworkError:
            types = []
        peers = [(p.agent_id, p.name) for p in self.peers.peers if p.agent_id != self.source.human_id]
        from tui.screens.open_channel import OpenChannelForm

        await self.push_screen(OpenChannelForm(types, peers))

    def on_open_channel_form_open_requested(self, event: OpenChannelForm.OpenRequested) -> None:
        self._open_channel(event)

    @work(group="open")
    async def _open_channel(self, request: OpenChannelForm.OpenRequested) -> None:
        try:
            channel_id = await self.source.open_channel(
                request.channel_type, request.targets, request.knobs, request.ttl, request.intent
            )
        except NetworkError as exc:
            request.form.show_error(str(exc))
            return
        request.form.dismiss(None)
        rows = await self.source.load_channels()
        self.notify(f"Opened {self.channel_label(channel_id)}.", timeout=3)
        self.channel_list.set_channels(rows)
        self.channel_list.select(channel_id)

    def action_close_channel(self) -> None:
        """Ask before closing the selected channel (closing is final: nobody can post into it again)."""
        channel_id = self.current_channel
        if not channel_id:
            return
        from tui.screens.confirm import ConfirmScreen

        label = self.channel_label(channel_id)
        names = [name for _, name in self.source.participants(channel_id)]

        def answered(yes: bool | None) -> None:
            if yes:
                self._close_channel(channel_id)
            else:
                self.notify(f"{label} stays open.", timeout=2)

        self.push_screen(
            ConfirmScreen(
                "Close channel",
                f"Close {label}?",
                f"Participants ({', '.join(names) or 'none'}) can no longer post into it; "
                "closing cannot be undone.",
                confirm_label="Close",
            ),
            answered,
        )

    @work(group="close")
    async def _close_channel(self, channel_id: str) -> None:
        try:
            await self.source.close_channel(channel_id)
        except NetworkError as exc:
            self.notify(humanize(str(exc), namer_for(self)), severity="error")
            return
        self.notify(f"Closed {self.channel_label(channel_id)}.", timeout=3)

    # ------------------------------------------------------------------ screenshot

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen in ``~/Downloads``, the pictures folder or the current directory
        (whichever exists first); the toast says where, or why it could not."""
        self._screenshot_folder = Path(path) if path else screenshot_directory()
        self.deliver_screenshot(filename, str(self._screenshot_folder))

    @on(DeliveryFailed)
    def _screenshot_failed(self, event: DeliveryFailed) -> None:
        if event.name == "screenshot":
            event.prevent_default()  # instead of Textual's "Failed to save screenshot", which says no why
            folder = getattr(self, "_screenshot_folder", None) or screenshot_directory()
            self.notify(screenshot_failure(folder, event.exception), title="Screenshot", severity="error")

    # ------------------------------------------------------------------ palette

    def domain_commands(self) -> list[DomainCommand]:
        commands = [
            DomainCommand("Open channel…", "Open a channel as yourself", self.action_open_channel),
            DomainCommand("Compose envelope…", "Hand-craft any envelope", self.action_compose_envelope),
            DomainCommand(
                "Filter tail…",
                "Filter the WAL tail by type, sender, audience, text",
                lambda: self.open_query("filter"),
            ),
            DomainCommand("Search tail…", "Find envelopes, then n / N", lambda: self.open_query("search")),
            DomainCommand("Go to seq…", "Jump to a sequence number", lambda: self.open_query("goto")),
            DomainCommand(
                "Fork here…",
                "Replay the channel from the tail's envelope with other views, models or prompts (F)",
                self.action_fork_here,
            ),
            DomainCommand(
                "Evaluate…",
                "Replay many channels under one change, score them against no change (E on the channel list)",
                self.action_evaluate,
            ),
            DomainCommand(
                "Follow tail", "Scroll to the newest envelope and keep following", self.tail.follow
            ),
            DomainCommand(
                "Show all channels", "Clear the channel selection", lambda: self.channel_list.select(None)
            ),
        ]
        commands += self.stepping_commands()
        commands += self.debug_commands()
        if self.selected_channel and self.check_action("close_channel", ()):
            commands.append(
                DomainCommand(
                    f"Close channel {self.channel_label(self.selected_channel)}",
                    "Close the selected channel",
                    self.action_close_channel,
                )
            )
        for name in registered_views():
            commands.append(
                DomainCommand(
                    f"Switch agent view: {name}",
                    "Preview the projection with this view (the channel is unchanged)",
                    lambda name=name: self.projected_view.switch_view(name),
                    discover=False,
                )
            )
        for channel_id, row in self.channel_list.rows.items():
            commands.append(
                DomainCommand(
                    f"Select channel {row.label} ({', '.join(row.participants)})",
                    f"{row.state}, {plural(row.count, 'envelope')}",
                    lambda channel_id=channel_id: self.channel_list.select(channel_id),
                    discover=False,
                )
            )
        if self.demo is not None and not self.demo_started:
            commands.append(
                DomainCommand("Start demo network", "Scripted agents and live traffic", self.start_demo)
            )
        return commands

    def start_demo(self) -> None:
        if self.demo is not None and not self.demo_started:
            self.demo_started = True
            self._run_demo()

    @work(group="demo")
    async def _run_demo(self) -> None:
        assert self.demo is not None
        try:
            await self.demo()
        except NetworkError as exc:
            self.notify(f"The demo could not start: {exc}", severity="error")
            return
        self.notify("Demo network started: scripted agents are talking.", timeout=4)


__all__ = ["DemoStarter", "WorkbenchActions"]

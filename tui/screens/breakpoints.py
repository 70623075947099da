"""The breakpoints list (issue 24): every breakpoint with what it stops, whether it is on, its hits and its
spec; ``space`` enables or disables the one under the cursor, ``d`` removes it, ``b`` sets a new one.
Step mode shows on the first line; ``s`` toggles it for the selected channel, ``S`` network-wide.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Label

from ag2net.breakpoints import Breakpoint
from ag2net.errors import NetworkError


class BreakpointsHost(Protocol):
    """What the list needs of the workbench (``WorkbenchApp``)."""

    breakpoints: list[Breakpoint]

    def step_mode_text(self) -> str: ...

    async def reload_breakpoints(self) -> list[Breakpoint]: ...

    async def toggle_breakpoint(self, breakpoint_id: str, enabled: bool) -> None: ...

    async def delete_breakpoint(self, breakpoint_id: str) -> None: ...

    def open_break_when(self, spec: str = "", origin: str = "") -> None: ...

    def toggle_step_mode(self, network: bool) -> None: ...


def on_text(on: str) -> str:
    return "turns" if on == "turn" else "posts"


class BreakpointsScreen(ModalScreen[None]):
    """The breakpoints, live: the list follows changes made here, by another operator or by the hub."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="breakpoints.close"),
        Binding("space", "toggle", "On/off", id="breakpoints.toggle"),
        Binding("d,delete", "remove", "Remove", id="breakpoints.remove"),
        Binding("b", "new", "New…", id="breakpoints.new"),
        Binding("s", "step(False)", "Step channel", id="breakpoints.step_channel"),
        Binding("S", "step(True)", "Step all", id="breakpoints.step_all"),
    ]

    DEFAULT_CSS = """
    BreakpointsScreen {
        align: center middle;
        background: $background 60%;
        & #bp-box {
            width: 100;
            max-width: 100%;
            height: 80%;
            min-height: 10;
            border: round $warning;
            border-title-color: $text-warning;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #bp-step { color: $text-warning; height: 1; }
        & #bp-table { height: 1fr; }
        & #bp-empty { color: $text-muted; height: auto; }
        & #bp-error { color: $text-error; height: auto; }
    }
    """

    def __init__(self, host: BreakpointsHost) -> None:
        super().__init__()
        self.host = host

    def compose(self) -> ComposeResult:
        with Vertical(id="bp-box") as box:
            box.border_title = "Breakpoints"
            yield Label(self.host.step_mode_text(), id="bp-step")
            table: DataTable[Any] = DataTable(id="bp-table", cursor_type="row", zebra_stripes=True)
            table.add_columns("on", "stops", "hits", "spec", "by")
            yield table
            yield Label("", id="bp-empty")
            yield Label("", id="bp-error")
        yield Footer()

    def on_mount(self) -> None:
        self.show(self.host.breakpoints)
        self.query_one("#bp-table", DataTable).focus()
        self.reload()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#bp-table", DataTable)

    def show(self, breakpoints: list[Breakpoint]) -> None:
        """Fill the table (the cursor stays on its breakpoint when it is still there)."""
        table = self.table
        keep = self.current_id()
        table.clear()
        for bp in breakpoints:
            table.add_row(
                "✓" if bp.enabled else "·",
                on_text(bp.on),
                str(bp.hits),
                bp.spec,
                bp.created_by or "",
                key=bp.breakpoint_id,
            )
        if keep is not None and keep in {bp.breakpoint_id for bp in breakpoints}:
            table.move_cursor(row=table.get_row_index(keep))
        self.query_one("#bp-empty", Label).update(
            "" if breakpoints else "No breakpoints. b sets one (or b on a tail envelope, a channel, a peer)."
        )
        self.query_one("#bp-step", Label).update(self.host.step_mode_text())

    def current_id(self) -> str | None:
        tables = self.query("#bp-table")  # none while the screen is torn down
        if not tables:
            return None
        table = tables.first(DataTable)
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:  # the cursor is off the rows
            return None
        return None if key.value is None else str(key.value)

    def _breakpoint(self, breakpoint_id: str | None) -> Breakpoint | None:
        return next((b for b in self.host.breakpoints if b.breakpoint_id == breakpoint_id), None)

    @work(group="breakpoints-reload", exclusive=True)
    async def reload(self) -> None:
        try:
            self.show(await self.host.reload_breakpoints())
        except NetworkError as exc:
            self.query_one("#bp-error", Label).update(str(exc))

    def action_close(self) -> None:
        self.dismiss(None)

    def action_toggle(self) -> None:
        bp = self._breakpoint(self.current_id())
        if bp is not None:
            self._act(self.host.toggle_breakpoint(bp.breakpoint_id, not bp.enabled))

    def action_remove(self) -> None:
        bp = self._breakpoint(self.current_id())
        if bp is not None:
            self._act(self.host.delete_breakpoint(bp.breakpoint_id))

    def action_new(self) -> None:
        self.host.open_break_when()

    def action_step(self, network: bool) -> None:
        self.host.toggle_step_mode(network)

    @work(group="breakpoints-act")
    async def _act(self, work: Any) -> None:
        try:
            await work
        except NetworkError as exc:
            self.query_one("#bp-error", Label).update(str(exc))
            return
        self.query_one("#bp-error", Label).update("")
        self.reload()

    @on(DataTable.RowSelected, "#bp-table")
    def _selected(self) -> None:
        self.action_toggle()


__all__ = ["BreakpointsHost", "BreakpointsScreen", "on_text"]

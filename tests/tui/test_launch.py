"""``tui.launch``: what ``ag2net tui --memory --demo`` runs, with the app driven by the pilot."""

from __future__ import annotations

import pytest
from tui_network import until

from ag2net import Hub
from tui import launch as launch_module
from tui.app import WorkbenchApp
from tui.settings import Settings


async def test_launch_in_memory_with_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    async def drive(app: WorkbenchApp) -> None:
        async with app.run_test(size=(160, 44)):
            await until(lambda: app.ready)
            await until(lambda: app.demo_started)
            await until(lambda: app.tail.row_count >= 3, timeout=15)
            seen["rows"] = app.tail.row_count
            seen["human"] = app.source.name_for(app.source.human_id)

    monkeypatch.setattr(WorkbenchApp, "run_async", drive)

    async def open_hub(path):
        return await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)

    async def run_network(func, hub):
        return await func(hub)

    await launch_module.launch(
        settings=Settings(),
        db_path=None,
        human_name="ana",
        start_demo=True,
        network=None,
        connect=None,
        token=None,
        operator_token=None,
        open_hub=open_hub,
        run_network=run_network,
    )
    assert seen["human"] == "ana"
    assert int(seen["rows"]) >= 3

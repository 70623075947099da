"""``tui.launch``: what ``ag2net tui --memory --demo`` runs, with the app driven by the pilot."""

from __future__ import annotations

import gc

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


def _launch_kwargs(open_hub) -> dict[str, object]:
    async def run_network(func, hub):
        return await func(hub)

    return {
        "settings": Settings(),
        "db_path": None,
        "human_name": "ana",
        "start_demo": False,
        "network": None,
        "connect": None,
        "token": None,
        "operator_token": None,
        "open_hub": open_hub,
        "run_network": run_network,
    }


async def test_no_collections_from_the_start_of_launch_to_the_first_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collector is held while the hub opens (and the app's modules are imported), the app gets that
    held collector, and once the app has run it is given back."""
    assert gc.isenabled()
    seen: dict[str, object] = {}

    async def drive(app: WorkbenchApp) -> None:
        seen["app_collector_active"] = app.collector.active
        seen["enabled_before_run"] = gc.isenabled()
        async with app.run_test(size=(120, 36)):
            await until(lambda: app.ready)

    async def open_hub(path):
        seen["enabled_at_open"] = gc.isenabled()
        return await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)

    monkeypatch.setattr(WorkbenchApp, "run_async", drive)
    await launch_module.launch(**_launch_kwargs(open_hub))  # type: ignore[arg-type]
    assert seen == {"enabled_at_open": False, "app_collector_active": True, "enabled_before_run": False}
    assert gc.isenabled()


async def test_a_start_that_fails_gives_the_collector_back() -> None:
    async def open_hub(path):
        raise OSError("the disk is gone")

    with pytest.raises(OSError, match="the disk is gone"):
        await launch_module.launch(**_launch_kwargs(open_hub))  # type: ignore[arg-type]
    assert gc.isenabled()

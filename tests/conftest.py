"""Shared fixtures: a hub on each store (real SQLite in a temp dir, and the memory store)."""

from __future__ import annotations

import pytest

from ag2net.hub import Hub
from ag2net.store import MemoryStore, SqliteStore


@pytest.fixture(params=["sqlite", "memory"])
def store_factory(request, tmp_path):
    """Builds a fresh store of the parametrised kind; SQLite reopenable on the same file."""
    path = tmp_path / "hub.db"

    def make():
        return SqliteStore(path) if request.param == "sqlite" else MemoryStore()

    make.kind = request.param
    make.path = path
    return make


@pytest.fixture
async def hub(store_factory):
    h = await Hub.open(
        store_factory(), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    yield h
    await h.close()


@pytest.fixture
async def hc(hub):
    """An in-process ``HubClient`` on whichever ``hub`` the test module uses."""
    from ag2net import HubClient

    client = HubClient.local(hub)
    yield client
    await client.close()


@pytest.fixture(autouse=True)
def private_user_dirs(tmp_path_factory, monkeypatch):
    """Point the per-user data, config and state folders at a temp dir: no test writes the real ones.

    HOME stays as it is (the interop tests keep their ag2 virtualenv under ``~/.cache``).
    """
    base = tmp_path_factory.mktemp("xdg")
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(base / var.lower()))

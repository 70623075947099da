"""A file that is not an ag2net store is refused before anything is written to it (issue 21 item 7).

Another application's SQLite database keeps its journal mode and its bytes; an empty (0-byte) file is refused in
one sentence instead of being adopted as an empty store: SQLite would take it for an empty database, but an empty
file at a path someone named is far more often a store that a failed copy or a full disk truncated, or a
placeholder ``touch`` made, than one to fill, and adopting it would show an empty store as if all were lost.
Through the library (``SqliteStore.open``) and the commands that open a store (``serve``, ``tui``)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ag2net.store import SqliteStore, StoreError


def foreign_database(path: Path, *, user_version: int = 0) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE x (id INTEGER PRIMARY KEY, note TEXT)")
    conn.execute("INSERT INTO x (note) VALUES ('theirs')")
    if user_version:
        conn.execute(f"PRAGMA user_version = {user_version}")
    conn.commit()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    return path.read_bytes()


def journal_mode(path: Path) -> str:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


def untouched(path: Path, before: bytes) -> None:
    assert journal_mode(path) == "delete"
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name)) == [path.name]


@pytest.mark.parametrize("user_version", [0, 1, 9], ids=["no-version", "version-1", "version-9"])
async def test_another_applications_database_is_refused_unchanged(tmp_path, user_version):
    path = tmp_path / "theirs.db"
    before = foreign_database(path, user_version=user_version)
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert ("newer than" if user_version > 1 else "another application (tables: x)") in message
    untouched(path, before)


async def test_an_empty_file_is_refused_and_stays_empty(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert str(path) in message and "empty file (0 bytes)" in message and "delete it" in message
    assert path.read_bytes() == b""
    assert [p.name for p in tmp_path.iterdir()] == ["empty.db"]


async def test_a_missing_file_is_created_as_a_new_store(tmp_path):
    path = tmp_path / "new.db"
    store = SqliteStore(path)
    await store.open()
    await store.set_meta("k", "v")
    await store.close()
    assert journal_mode(path) == "wal" and path.stat().st_size > 0


def command(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    return subprocess.run(
        [sys.executable, "-m", "ag2net.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def one_sentence(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


@pytest.mark.parametrize("cmd", ["serve", "tui"])
def test_commands_refuse_a_foreign_database_without_changing_it(tmp_path, cmd):
    folder = tmp_path / "files"
    folder.mkdir()
    path = folder / "theirs.db"
    before = foreign_database(path)
    args = ["serve", "--port", "0"] if cmd == "serve" else ["tui", "--as", "ana"]
    sentence = one_sentence(command(tmp_path, *args, "--db", str(path)))
    assert "another application (tables: x)" in sentence
    assert journal_mode(path) == "delete" and path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


@pytest.mark.parametrize("cmd", ["serve", "tui"])
def test_commands_refuse_an_empty_file(tmp_path, cmd):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    args = ["serve", "--port", "0"] if cmd == "serve" else ["tui", "--as", "ana"]
    sentence = one_sentence(command(tmp_path, *args, "--db", str(path)))
    assert "empty file (0 bytes)" in sentence and str(path) in sentence
    assert path.read_bytes() == b""

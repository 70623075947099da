"""The guard against writing in the real per-user folders counts what the test processes write, and only that
(issue 22 item 8): a workbench the developer has open, writing its log and database in the real folders
while the suite runs, does not fail the run; a test, its xdist worker or a subprocess it starts does.

Each case runs a small pytest session under this conftest, with a throwaway folder as the 'real' HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import GUARD_VARS

DEVELOPER_WORKBENCH = """
import pathlib, sqlite3, sys, time
folder = pathlib.Path(sys.argv[1]) / ".local" / "share" / "ag2net"
folder.mkdir(parents=True, exist_ok=True)
db = sqlite3.connect(folder / "workbench.db")
db.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
n = 0
while True:
    n += 1
    (folder / "workbench.log").write_text(f"line {n}\\n")
    db.execute("INSERT INTO t VALUES (?)", (n,))
    db.commit()
    if n == 1:
        print("writing", flush=True)
    time.sleep(0.02)
"""


def inner_session(tmp_path: Path, body: str, *extra: str) -> subprocess.CompletedProcess[str]:
    real_home = tmp_path / "real-home"
    real_home.mkdir(parents=True, exist_ok=True)
    inner = tmp_path / "inner"
    inner.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), inner / "conftest.py")
    (inner / "test_inner.py").write_text(
        "import os, subprocess, sys, time\nfrom pathlib import Path\nimport conftest\n\n\ndef test_body():\n"
        + body,
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") and k != "AG2NET_INTEROP_DIR"}
    env["HOME"] = str(real_home)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'bt'}"]
    return subprocess.run(
        [*argv, *extra, str(inner)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=inner,
        env=env,
        check=False,
    )


def test_another_process_writing_in_the_real_folders_does_not_fail_the_run(tmp_path):
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    # the developer's workbench: started outside the run, so none of the run's guard reaches it
    env = {k: v for k, v in os.environ.items() if k not in GUARD_VARS and not k.startswith("XDG_")}
    env["HOME"] = str(real_home)
    writer = subprocess.Popen(
        [sys.executable, "-c", DEVELOPER_WORKBENCH, str(real_home)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
        before = (real_home / ".local/share/ag2net/workbench.log").read_text()
        done = inner_session(tmp_path, "    time.sleep(1.0)\n")
        after = (real_home / ".local/share/ag2net/workbench.log").read_text()
    finally:
        writer.kill()
        writer.wait()
    assert before != after  # it did write while the session ran
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote outside its temporary folders" not in done.stdout


def test_a_subprocess_of_a_test_writing_in_the_real_folders_fails_the_run(tmp_path):
    body = (
        "    target = conftest.REAL_HOME / '.config' / 'ag2net' / 'from-a-child.json'\n"
        "    code = f'import pathlib; p = pathlib.Path({str(target)!r}); p.parent.mkdir(parents=True); "
        'p.write_text("x")\'\n'
        "    subprocess.run([sys.executable, '-c', code], check=True)\n"
    )
    done = inner_session(tmp_path, body)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote outside its temporary folders" in done.stdout and "from-a-child.json" in done.stdout


def test_a_sqlite_database_a_test_opens_in_the_real_folders_fails_the_run(tmp_path):
    body = (
        "    import sqlite3\n"
        "    folder = conftest.REAL_HOME / '.local' / 'share' / 'ag2net'\n"
        "    folder.mkdir(parents=True)\n"
        "    sqlite3.connect(folder / 'workbench.db').close()\n"
    )
    done = inner_session(tmp_path, body)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "workbench.db" in done.stdout


def test_a_write_in_an_xdist_worker_fails_the_run(tmp_path):
    pytest.importorskip("xdist")
    body = (
        "    p = conftest.REAL_HOME / '.cache' / 'ag2net' / 'from-a-worker.txt'\n"
        "    p.parent.mkdir(parents=True)\n"
        "    p.write_text('x')\n"
    )
    started = time.monotonic()
    done = inner_session(tmp_path, body, "-n", "2")
    assert done.returncode == 1, (done.stdout + done.stderr, time.monotonic() - started)
    assert "from-a-worker.txt" in done.stdout

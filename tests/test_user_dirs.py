"""The suite writes nothing outside its temporary folders: HOME and the XDG folders point at temp dirs,
and the workbench's files (settings, composer draft, database, log) land there."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

from conftest import REAL_HOME, REAL_USER_DIRS, USER_DIR_VARS, real_ag2net_entries


def test_home_and_the_xdg_folders_are_temporary(private_home, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    assert Path.home() == private_home and base in private_home.parents
    assert Path.home() != REAL_HOME
    for var in USER_DIR_VARS:
        value = Path(os.environ[var])
        assert base in value.parents, var
        assert value != REAL_USER_DIRS[var]


def test_the_workbench_files_land_in_the_temporary_folders(tmp_path_factory):
    from ag2net.cli.support import default_db_path
    from tui.launch import log_to_file
    from tui.settings import Settings, default_config_path

    base = tmp_path_factory.getbasetemp()
    settings = Settings()
    for path in (default_config_path(), settings.drafts_path, settings.database, default_db_path()):
        assert base in path.parents, path
    log = log_to_file(None)
    try:
        logging.getLogger("ag2net.test").warning("written to the temporary log")
        assert base in log.parents and log.exists()
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
            if Path(handler.baseFilename) == log:
                root.removeHandler(handler)
                handler.close()


def test_a_subprocess_sees_the_temporary_home(tmp_path_factory):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pathlib import Path; from tui.settings import Settings; "
            "print(Path.home()); print(Settings().drafts_path)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    home, drafts = done.stdout.splitlines()
    base = str(tmp_path_factory.getbasetemp())
    assert home.startswith(base) and drafts.startswith(base)


def test_the_real_folders_are_watched():
    """The session-finish check reads the real folders: its listing is of real paths, never temp ones."""
    entries = real_ag2net_entries()
    assert all(not path.startswith(os.environ["HOME"]) for path in entries)
    assert all("ag2net-interop" not in path for path in entries)


def _inner_run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """Run a one-test pytest session under this conftest, with a throwaway folder as the 'real' HOME."""
    import shutil

    real_home = tmp_path / "real-home"
    real_home.mkdir(parents=True)
    inner = tmp_path / "inner"
    inner.mkdir()
    shutil.copy(Path(__file__).with_name("conftest.py"), inner / "conftest.py")
    (inner / "test_inner.py").write_text(
        "from pathlib import Path\nimport conftest\n\n\ndef test_write():\n" + body, encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_") and k != "AG2NET_INTEROP_DIR"}
    env["HOME"] = str(real_home)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'basetemp'}",
            str(inner),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=inner,
        env=env,
        check=False,
    )


def test_the_session_fails_when_a_test_writes_in_the_real_folders(tmp_path):
    leak = "    p = conftest.REAL_HOME / '.config' / 'ag2net' / 'leak.json'\n"
    leak += "    p.parent.mkdir(parents=True)\n    p.write_text('{}')\n"
    done = _inner_run(tmp_path, leak)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "wrote outside its temporary folders" in done.stdout and "leak.json" in done.stdout
    fine = "    p = Path.home() / '.config' / 'ag2net' / 'draft.json'\n"
    fine += "    p.parent.mkdir(parents=True)\n    p.write_text('{}')\n"
    done = _inner_run(tmp_path / "again", fine)
    assert done.returncode == 0, done.stdout + done.stderr

"""Where a client keeps the identity secrets token servers issue: one JSON file in the user's data folder
(``$XDG_DATA_HOME/ag2net/identity-secrets.json``, ``~/.local/share`` by default), mode 0600, by hub URL and
identity name. A secret is handed over once, at registration; losing it means the name cannot be
re-attached, so the file is written atomically and a damaged one is set aside, never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "identity-secrets.json"


def default_secret_path() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ag2net" / FILE_NAME


def _hub_key(url: str) -> str:
    return url.rstrip("/")


class SecretFile:
    """Identity secrets by hub URL and name, in one file readable by its owner only."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_secret_path()

    def get(self, url: str, name: str) -> str | None:
        secret = self._load().get(_hub_key(url), {}).get(name)
        return secret if isinstance(secret, str) else None

    def put(self, url: str, name: str, secret: str) -> None:
        data = self._load(set_aside=True)
        data.setdefault(_hub_key(url), {})[name] = secret
        self._write(data)

    def forget(self, url: str, name: str) -> None:
        data = self._load(set_aside=True)
        names = data.get(_hub_key(url), {})
        if names.pop(name, None) is not None:
            if not names:
                data.pop(_hub_key(url), None)
            self._write(data)

    def _load(self, *, set_aside: bool = False) -> dict[str, dict[str, str]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            log.warning("cannot read identity secrets from %s: %s", self.path, exc)
            return {}
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
                raise ValueError("not an object of objects")
        except ValueError as exc:
            log.warning("%s is damaged (%s)", self.path, exc)
            if set_aside:  # about to write: keep the damaged file for a person to rescue
                aside = self.path.with_name(f"{self.path.name}.damaged-{int(time.time())}")
                with contextlib.suppress(OSError):
                    os.replace(self.path, aside)
                    log.warning("set %s aside as %s", self.path, aside)
            return {}
        return data

    def _write(self, data: dict[str, dict[str, str]]) -> None:
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = folder / f".{self.path.name}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


__all__ = ["SecretFile", "default_secret_path"]

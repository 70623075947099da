"""Repro bundles: one file (``.ag2b``) holding a channel, the channels causally linked to it, the
identities, skills and rules they need and every turn record, so a colleague can open it in the workbench
offline and replay it with no API key. See ``docs/bundles.md``.

``collect`` (from any store; ``ag2net.cli.bundle.make_bundle`` from a database file or URL, read-only),
``write_bundle``, ``read_bundle``, ``open_bundle_hub``; ``Redactor`` for ``--redact``; ``traces_in`` reads
OTLP JSON into a ``Bundle``.
"""

from __future__ import annotations

from ag2net.bundle import format, hub
from ag2net.bundle.collect import collect, linked_channels
from ag2net.bundle.format import *
from ag2net.bundle.hub import *
from ag2net.bundle.redact import RedactionError, Redactor

# ``format`` and ``hub`` are re-exported whole (their ``__all__`` lists each name once, beside its definition)
__all__ = ["RedactionError", "Redactor", "collect", "linked_channels"]
__all__ += format.__all__
__all__ += hub.__all__

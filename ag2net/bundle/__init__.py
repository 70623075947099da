"""Repro bundles: one file (``.ag2b``) holding a channel, the channels causally linked to it, the
identities, skills and rules they need and every turn record, so a colleague can open it in the workbench
offline and replay it with no API key. See ``docs/bundles.md``.

``collect`` (from any store; ``ag2net.cli.bundle.make_bundle`` from a database file or URL, read-only),
``write_bundle``, ``read_bundle``, ``open_bundle_hub``; ``Redactor`` for ``--redact``; ``traces_in`` reads
OTLP JSON into a ``Bundle``.
"""

from __future__ import annotations

from ag2net.bundle.collect import collect, linked_channels
from ag2net.bundle.format import (
    FORMAT,
    SUFFIX,
    VERSION,
    Bundle,
    BundleError,
    encode_bundle,
    looks_like_bundle,
    read_bundle,
    write_bundle,
)
from ag2net.bundle.hub import bundle_store, open_bundle_hub
from ag2net.bundle.redact import RedactionError, Redactor

__all__ = [
    "FORMAT",
    "SUFFIX",
    "VERSION",
    "Bundle",
    "BundleError",
    "RedactionError",
    "Redactor",
    "bundle_store",
    "collect",
    "encode_bundle",
    "linked_channels",
    "looks_like_bundle",
    "open_bundle_hub",
    "read_bundle",
    "write_bundle",
]

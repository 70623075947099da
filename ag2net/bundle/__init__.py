"""Repro bundles: one file (``.ag2b``) holding a channel, the channels causally linked to it, the
identities, skills and rules they need and every turn record, so a colleague can open it in the workbench
offline and replay it with no API key. See ``docs/bundles.md``.

``make_bundle`` (from a database) / ``collect`` (from any store), ``write_bundle``, ``read_bundle``,
``open_bundle_hub``; ``Redactor`` for ``--redact``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ag2net.bundle.collect import Source, collect, linked_channels, read_source
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


async def make_bundle(
    db: str,
    channel: str,
    *,
    follow_causation: bool = False,
    first_seq: int | None = None,
    last_seq: int | None = None,
    redact: str | list[str] | None = None,
) -> Bundle:
    """The bundle of ``channel`` (a label, a tail, an id or a prefix) of the database ``db`` (a SQLite path or a
    ``postgresql://`` URL, opened read-only); write it with ``write_bundle``."""
    import asyncio

    redactor = Redactor.parse(redact)
    source = await asyncio.to_thread(read_source, db, channel)
    store = await source.store()
    return await collect(
        store,
        source.channel_id,
        follow_causation=follow_causation,
        first_seq=first_seq,
        last_seq=last_seq,
        redactor=redactor,
        labels=source.labels,
    )


async def bundle_file(db: str, channel: str, output: str | Path, **options: Any) -> Bundle:
    """``make_bundle`` then ``write_bundle`` to ``output``."""
    bundle = await make_bundle(db, channel, **options)
    write_bundle(bundle, output)
    return bundle


__all__ = [
    "FORMAT",
    "SUFFIX",
    "VERSION",
    "Bundle",
    "BundleError",
    "RedactionError",
    "Redactor",
    "Source",
    "bundle_file",
    "bundle_store",
    "collect",
    "encode_bundle",
    "linked_channels",
    "looks_like_bundle",
    "make_bundle",
    "open_bundle_hub",
    "read_bundle",
    "read_source",
    "write_bundle",
]

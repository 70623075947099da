"""``ag2net mcp``: the workbench's debugger for coding agents, as an MCP server (the ``mcp`` extra).

- ``ag2net.mcp.network``: the network the server looks at (a database, opened read-only, or a running hub)
  and the one-sentence ``Refusal``; no ``mcp`` import.
- ``ag2net.mcp.tools``: the tools in their fixed order, their JSON schemas, argument checks and paging
  cursors; no ``mcp`` import.
- ``ag2net.mcp.reading`` (channels, WAL, envelope, projection, turns, compare_turns) and
  ``ag2net.mcp.debugging`` (visibility, state_at, causation, dry_run, replay, post): the tools' answers;
  ``ag2net.mcp.calls``: one call or resource read, checked, with its refusal; no ``mcp`` import.
- ``ag2net.mcp.server``: the MCP server on the official SDK, over stdio or streamable HTTP.
- ``ag2net.mcp.cli``: the Typer app with the one command ``mcp``.

Importing this package imports nothing of the SDK: only ``ag2net.mcp.server`` does, when the command runs.
"""

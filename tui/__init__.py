"""The ag2net workbench: a Textual UI over ag2net's public client API (``ag2net tui``)."""

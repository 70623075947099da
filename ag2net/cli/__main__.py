"""``python -m ag2net.cli``: the ``ag2net`` command."""

from ag2net.cli.commands import main

main()

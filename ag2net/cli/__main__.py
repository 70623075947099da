"""``python -m ag2net.cli``: the ``ag2net`` command (importing this module runs nothing)."""

from ag2net.cli.commands import main

if __name__ == "__main__":
    main()

"""The hub's dry run under its old module name, for the importers outside ``ag2net/`` not yet moved
(``tui/screens/visibility_matrix.py``, ``tui/screens/causation_tree.py``, ``bench/debugger.py``): import
``ag2net.hub.dry_run`` instead. Delete this module once they do."""

from ag2net.hub.dry_run import *  # noqa: F403
from ag2net.hub.dry_run import __all__  # noqa: F401

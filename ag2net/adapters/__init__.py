"""Channel adapters: the pure rules of each channel type, the workflow's transition graphs, and ``say``.

Each module's ``__all__`` is what it offers and this package re-exports it whole (the ``asyncio`` shape), so
a public name is listed once, beside its definition.
"""

from ag2net.adapters import base, consulting, conversation, discussion, registry, say, transitions, workflow
from ag2net.adapters.base import *
from ag2net.adapters.consulting import *
from ag2net.adapters.conversation import *
from ag2net.adapters.discussion import *
from ag2net.adapters.registry import *
from ag2net.adapters.say import *
from ag2net.adapters.transitions import *
from ag2net.adapters.workflow import *
from ag2net.channel import AdapterResult

__all__ = ["AdapterResult"]
__all__ += base.__all__
__all__ += consulting.__all__
__all__ += conversation.__all__
__all__ += discussion.__all__
__all__ += registry.__all__
__all__ += say.__all__
__all__ += transitions.__all__
__all__ += workflow.__all__

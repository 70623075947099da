"""The garbage collector tuned for a serving process: short pauses instead of CPython's long full sweeps.

Measured in ``bench/soak.py`` (10 WebSocket clients, 800 posts/s into ``ag2net serve``) with CPython's
default thresholds ``(700, 10, 10)``, the served hub ran a full collection every ~9 s that held the event
loop for 40-130 ms of CPU (it walks every object the process holds, the imported modules included), plus
young collections of up to 20 ms: those pauses, not the hub's work, were the soak's p99.

:func:`tune_for_latency` is called once the hub is open (its state loaded):

- ``gc.freeze()`` moves everything alive at that point (modules, classes, the loaded channel state) to the
  permanent generation, which no collection walks again;
- thresholds ``(5000, 100, 100)``: a young collection walks at most a few thousand objects (≈2-3 ms),
  objects that die young are freed by reference counting before they are ever promoted, and a full
  collection runs only after 100 middle ones, i.e. hours apart at the soak's rate, instead of every few
  seconds. Cycles still die: the young and middle collections find them, and the rare full one catches
  what was promoted. The soak's RSS slope (budget ≤ 1 MiB/min) is the check that nothing piles up.

``ag2net serve --gc default`` keeps CPython's settings. A client process of your own (an agent) keeps
whatever it has: this module changes nothing on import. The workbench has a policy of its own, tied to the
person's typing (``tui/collector.py``).
"""

from __future__ import annotations

import gc

LATENCY_THRESHOLDS = (5000, 100, 100)


def tune_for_latency() -> tuple[int, int, int]:
    """Collect once, freeze what is alive, set :data:`LATENCY_THRESHOLDS`; returns the thresholds before."""
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*LATENCY_THRESHOLDS)
    return before

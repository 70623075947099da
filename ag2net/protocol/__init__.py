"""The protocol between clients and the hub, below client, hub and transport: the op catalogue (one
declaration per op: params, result, access rule, codec), the frames, the one JSON codec,
``ObservedEvent`` and the ports the links are typed against. Nothing here does I/O."""

from ag2net.protocol import ports
from ag2net.protocol.codec import Codec, dumps, to_wire
from ag2net.protocol.observe import ObservedEvent
from ag2net.protocol.ops import OPS, Access, OpSpec, Param, spec_for
from ag2net.protocol.ports import *
from ag2net.protocol.records import PendingTurn

__all__ = [
    "OPS",
    "Access",
    "Codec",
    "ObservedEvent",
    "OpSpec",
    "Param",
    "PendingTurn",
    "dumps",
    "spec_for",
    "to_wire",
]
__all__ += ports.__all__  # the ports, every one of them

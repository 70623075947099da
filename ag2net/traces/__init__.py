"""Traces in and out: ag2net's turns and channels as OpenTelemetry GenAI spans.

* ``ag2net.traces.genai`` — the pure mapping: a stored turn record (``TurnRecord.to_dict()``) becomes the
  spans of one agent turn (``invoke_agent``, one ``chat`` per model call, ``execute_tool`` per tool call),
  in the GenAI semantic conventions with AG2's own dialect beside them. Used by the live tracer
  (``ag2net.hub.telemetry``) and by the export alike; it imports no OpenTelemetry.
* ``ag2net.traces.otlp`` — a channel's WAL and turn records as one trace (``network.channel`` at its root),
  written as OTLP JSON (``resourceSpans``) or as AG2 eval's trace directory; no tracer needed.

Nothing here imports OpenTelemetry: the spans are plain ``SpanSpec`` records until a tracer (live) or a
writer (export) turns them into something else.
"""

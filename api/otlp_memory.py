"""The OTLP trace memory: each project's recent spans, bounded in traces and in bytes per project.

Spans of one trace arrive over several exports (children before their root), so
:mod:`.otlp` keeps each trace's spans until its root came and re-derives the trace's events
on every export. That memory is held **per project**, each project with its own least
recently used order, trace count and byte budget: one tenant's flood of junk traces evicts
only that tenant's own traces, never another's half-received trace (whose failed child,
evicted, would leave its task stored as succeeded when its root arrives).

A span is kept only with what the mapping reads (:data:`KEPT_ATTRIBUTES`, the resource's
:data:`KEPT_RESOURCE`), every kept text cut to :data:`MAX_KEPT_CHARS`: an exporter's other
attributes, however many, cost nothing after the request. The budget counts an estimate of
the kept span's Python objects (:func:`kept_bytes`) plus the event ids sent for it. Projects
come from keys (a project key names only its own), so their number is the deployment's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .otlp_decode import Span, decode

#: Every span attribute the mapping (:mod:`.otlp`) reads; a test holds this equal to the
#: attribute names spelled in that module.
KEPT_ATTRIBUTES = frozenset({
    "gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind", "gen_ai.request.model",
    "gen_ai.response.model", "gen_ai.provider.name", "gen_ai.system", "server.address", "retrylens.task_id",
    "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt",
    "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion",
    "http.request.method", "http.method", "http.response.status_code", "http.status_code",
    "http.request.resend_count", "error.type",
})
#: The resource attributes the mapping reads.
KEPT_RESOURCE = frozenset({"service.name", "retrylens.project"})
#: A kept text is cut here (the mapping keeps 2,000 characters of an error message at most).
MAX_KEPT_CHARS = 2_000
MAX_TRACES = 10_000
MAX_SPANS_PER_TRACE = 2_000
#: Per project: 32 MiB of kept spans (~60,000 typical spans).
MAX_BYTES = 32 * 1024 * 1024
#: What a span costs besides its texts: the object, its two ids, its dicts, the event ids sent for it.
SPAN_OVERHEAD = 1_200
_TEXT_OVERHEAD = 60


def _kept_value(value: Any) -> Any:
    """A scalar as is (texts cut); an array or map as its text, cut: the mapping reads scalars."""
    if value is None or isinstance(value, bool | int | float):
        return value
    return (value if isinstance(value, str) else str(value))[:MAX_KEPT_CHARS]


def kept_span(span: Span, resources: dict[int, dict[str, Any]] | None = None) -> Span:
    """``span`` with only what the mapping reads. ``resources`` shares one kept resource
    between the spans of one exported resource (keyed by the original's identity)."""
    cache = resources if resources is not None else {}
    resource = cache.get(id(span.resource))
    if resource is None:
        resource = cache[id(span.resource)] = {k: _kept_value(v) for k, v in span.resource.items()
                                               if k in KEPT_RESOURCE}
    return replace(
        span, name=span.name[:MAX_KEPT_CHARS], resource=resource,
        attrs={k: _kept_value(v) for k, v in span.attrs.items() if k in KEPT_ATTRIBUTES},
        status_message=span.status_message[:MAX_KEPT_CHARS],
        exception_type=span.exception_type[:MAX_KEPT_CHARS],
        exception_message=span.exception_message[:MAX_KEPT_CHARS],
    )


def kept_spans(body: bytes, content_type: str, content_encoding: str, max_inflated: int) -> list[Span]:
    """The spans of an OTLP export body as kept (:func:`kept_span`): what the route runs in its
    worker process (:mod:`.offload`), so only the kept spans come back to the server."""
    resources: dict[int, dict[str, Any]] = {}
    return [kept_span(span, resources) for span in decode(body, content_type, content_encoding,
                                                           max_inflated=max_inflated)]


def kept_bytes(span: Span) -> int:
    """An estimate (from above, for ASCII) of the memory a kept span holds."""
    texts = [span.name, span.status_message, span.exception_type, span.exception_message]
    texts += [str(k) for k in span.attrs] + [v for v in span.attrs.values() if isinstance(v, str)]
    return SPAN_OVERHEAD + 100 * len(span.attrs) + sum(_TEXT_OVERHEAD + 4 * len(t) for t in texts if t)


@dataclass
class _Trace:
    spans: dict[str, Span] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    sent: set[str] = field(default_factory=set)
    bytes: int = 0


class _ProjectTraces:
    """One project's traces in least recently used order, within its own bounds."""

    def __init__(self, max_traces: int, max_bytes: int) -> None:
        self.traces: OrderedDict[str, _Trace] = OrderedDict()
        self.bytes = 0
        self.max_traces = max_traces
        self.max_bytes = max_bytes

    def add(self, span: Span) -> _Trace:
        trace = self.traces.get(span.trace_id)
        if trace is None:
            trace = self.traces[span.trace_id] = _Trace()
        self.traces.move_to_end(span.trace_id)
        size = kept_bytes(span)
        room = len(trace.spans) < MAX_SPANS_PER_TRACE and trace.bytes + size <= self.max_bytes
        if room or span.span_id in trace.spans:
            trace.bytes += size - trace.sizes.get(span.span_id, 0)
            self.bytes += size - trace.sizes.get(span.span_id, 0)
            trace.spans[span.span_id], trace.sizes[span.span_id] = span, size
        self._evict(keep=span.trace_id)
        return trace

    def _evict(self, keep: str) -> None:
        """Forget the least recently used traces until within bounds (never ``keep``, the one just added to)."""
        while (len(self.traces) > self.max_traces or self.bytes > self.max_bytes) and len(self.traces) > 1:
            oldest = next(iter(self.traces))
            if oldest == keep:
                self.traces.move_to_end(keep)
                oldest = next(iter(self.traces))
            self.bytes -= self.traces.pop(oldest).bytes


class TraceBook:
    """Recent spans per (project, trace) and the event ids already sent; bounded per project, thread-safe."""

    def __init__(self, *, max_traces: int = MAX_TRACES, max_bytes: int = MAX_BYTES) -> None:
        self._projects: dict[str, _ProjectTraces] = {}
        self._max_traces = max_traces
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def merge(self, project: str, spans: Iterable[Span]) -> list[tuple[str, dict[str, Span], set[str]]]:
        """Add ``spans``; return (trace id, all its kept spans, sent ids) of every trace they touch."""
        resources: dict[int, dict[str, Any]] = {}
        kept = [kept_span(span, resources) for span in spans]
        touched: dict[str, _Trace] = {}
        with self._lock:
            traces = self._projects.get(project)
            if traces is None:
                traces = self._projects[project] = _ProjectTraces(self._max_traces, self._max_bytes)
            for span in kept:
                touched[span.trace_id] = traces.add(span)
            return [(trace_id, dict(trace.spans), trace.sent) for trace_id, trace in touched.items()]

    def mark_sent(self, sent: set[str], ids: Iterable[str]) -> None:
        with self._lock:
            sent.update(ids)

    def usage(self, project: str) -> tuple[int, int]:
        """(traces, estimated bytes) held for ``project``."""
        with self._lock:
            traces = self._projects.get(project)
            return (len(traces.traces), traces.bytes) if traces is not None else (0, 0)

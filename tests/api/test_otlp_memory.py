"""The OTLP trace memory: one project's traffic never evicts another's trace, and each
project's memory is bounded in bytes, whatever its exporters attach to their spans."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from retrylens.api import otlp
from retrylens.api.otlp import trace_events
from retrylens.api.otlp_decode import Span
from retrylens.api.otlp_memory import KEPT_ATTRIBUTES, KEPT_RESOURCE, MAX_TRACES, TraceBook

T0 = 1_760_000_000_000_000_000
ROOT, CHILD = "b7ad6b7169203331", "00f067aa0ba902b7"


def _span(trace: str, span_id: str, parent: str | None, *, error: bool = False, attrs: dict | None = None) -> Span:
    return Span(trace_id=trace, span_id=span_id, parent_id=parent, name="chat" if parent else "workflow",
                start_ns=T0, end_ns=T0 + 10**9, attrs=attrs if attrs is not None else (
                    {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"} if parent else {}),
                resource={"service.name": "billing"}, error=error)


def _outcome(book: TraceBook, project: str, trace: str, spans: list[Span]) -> str:
    (found,) = [(trace_id, kept) for trace_id, kept, _sent in book.merge(project, spans) if trace_id == trace]
    finished = [e for e in trace_events(found[0], found[1], project, {}) if e["kind"] == "task_finished"]
    return finished[0]["outcome"]


def test_another_projects_junk_traces_never_evict_a_half_received_trace():
    """finance sends a failed chat span, shop sends 10,001 junk traces, finance sends the root:
    finance's task failed (with one shared 10,000-trace LRU it was stored as succeeded)."""
    book, trace = TraceBook(), "0af7651916cd43dd8448eb211c80319c"
    book.merge("finance", [_span(trace, CHILD, ROOT, error=True)])
    book.merge("shop", [_span(f"{i + 1:032x}", ROOT, None) for i in range(MAX_TRACES + 1)])
    assert _outcome(book, "finance", trace, [_span(trace, ROOT, None)]) == "failed"


def test_a_projects_own_flood_evicts_only_its_oldest_traces():
    book = TraceBook(max_traces=3)
    for i in range(5):
        book.merge("shop", [_span(f"{i + 1:032x}", ROOT, None)])
    book.merge("finance", [_span("f" * 32, ROOT, None)])
    assert book.usage("shop")[0] == 3 and book.usage("finance")[0] == 1


def test_a_projects_memory_stays_within_its_byte_budget_whatever_the_spans_carry():
    """Spans with a thousand 1 KB attributes each (what one ~620 KB request of them grew to
    600 MB from) are kept with the attributes the mapping reads, within the project's bytes."""
    budget = 2_000_000
    book = TraceBook(max_bytes=budget)
    junk = {f"junk.{k}": "x" * 1_000 for k in range(1_000)}
    for batch in range(20):
        spans = [_span(f"{batch * 100 + i + 1:032x}", CHILD, ROOT,
                       attrs={**junk, "gen_ai.request.model": "m" * 50_000}) for i in range(100)]
        for _trace, kept, _sent in book.merge("shop", spans):
            assert all(set(s.attrs) <= KEPT_ATTRIBUTES and len(s.attrs["gen_ai.request.model"]) == 2_000
                       for s in kept.values())
        assert book.usage("shop")[1] <= budget
    assert book.usage("shop")[0] < 2_000  # the oldest traces were forgotten to stay within it


def test_one_trace_larger_than_the_budget_keeps_only_what_fits():
    book = TraceBook(max_bytes=100_000)
    trace = "a" * 32
    spans = [_span(trace, f"{i + 1:016x}", ROOT, attrs={"error.type": "e" * 2_000}) for i in range(2_000)]
    book.merge("shop", spans)
    assert book.usage("shop")[1] <= 100_000


def test_the_kept_attributes_are_every_attribute_the_mapping_reads():
    """A new attribute read by the mapping but not kept would silently read as missing."""
    tree = ast.parse(Path(otlp.__file__).read_text())
    spelled = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
               and isinstance(node.value, str) and re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", node.value)}
    assert spelled == KEPT_ATTRIBUTES | KEPT_RESOURCE


def test_the_mapping_gives_the_same_events_from_kept_spans_as_from_whole_ones():
    trace = "0af7651916cd43dd8448eb211c80319c"
    spans = [_span(trace, ROOT, None), _span(trace, CHILD, ROOT, error=True,
                                             attrs={"gen_ai.operation.name": "chat", "http.status_code": 429,
                                                    "gen_ai.usage.input_tokens": 7, "junk": "x" * 100})]
    (found,) = TraceBook().merge("p", spans)
    whole = trace_events(trace, {s.span_id: s for s in spans}, "p", {})
    assert trace_events(trace, found[1], "p", {}) == whole

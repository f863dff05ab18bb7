"""Tenant binding (``project_topics``): parsing, refusals, and the verdicts of the decode step."""

from __future__ import annotations

import pytest
from factories import make_event

from retrylens.config import load_settings
from retrylens.errors import ConfigError
from retrylens.ingest.binding import ProjectBinding, parse_project_topics, refusal
from retrylens.ingest.encoder import RawChunk, encode_chunk, encode_raw
from retrylens.ingest.processor import InvalidReason

EVENTS, DLQ = "retrylens.events", "retrylens.events.dlq"


def parse(value: object) -> ProjectBinding | None:
    return parse_project_topics(value, event_topic=EVENTS, dlq_topic=DLQ)  # type: ignore[arg-type]


def test_empty_binding_is_off() -> None:
    assert parse({}) is None


def test_binding_maps_each_topic_to_the_projects_bound_to_it() -> None:
    binding = parse({"alice": ["events.alice", "events.shared"], "bob": ["events.bob", "events.shared"]})
    assert binding is not None
    assert binding.projects_for("events.alice") == {"alice"}
    assert binding.projects_for("events.shared") == {"alice", "bob"}
    assert binding.projects_for("events.unknown") == frozenset()
    # The consumer reads the event topic first, then every bound topic once.
    assert binding.topics == (EVENTS, "events.alice", "events.bob", "events.shared")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (["alice"], "expected a JSON object"),
        ({"": ["events.a"]}, "non-empty name"),
        ({" alice": ["events.a"]}, "without surrounding spaces"),
        ({"alice": []}, "non-empty list of topics"),
        ({"alice": "events.alice"}, "non-empty list of topics"),
        ({"alice": ["events alice"]}, "is not a Kafka topic name"),
        ({"alice": [""]}, "is not a Kafka topic name"),
        ({"alice": [".."]}, "is not a Kafka topic name"),
        ({"alice": ["x" * 250]}, "is not a Kafka topic name"),
        ({"alice": [7]}, "is not a Kafka topic name"),
        ({"alice": [DLQ]}, "is the dead-letter topic"),
    ],
)
def test_bad_bindings_name_the_bad_entry(value: object, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse(value)


def test_refusal_says_which_projects_a_topic_allows() -> None:
    assert refusal("alice", "events.alice", frozenset({"alice"})) is None
    detail = refusal("bob", "events.alice", frozenset({"alice"}))
    assert detail == "project 'bob' is not bound to topic 'events.alice' (project_topics allows: alice)"
    assert "which no project is bound to" in (refusal("bob", EVENTS, frozenset()) or "")
    many = refusal("z", "t", frozenset(f"p{i:02d}" for i in range(12)))
    assert many is not None and many.endswith("p09, ...)")


def test_the_decode_step_dead_letters_unbound_projects_and_keeps_the_rest() -> None:
    values = [
        make_event(project="alice").to_json_bytes(),
        make_event(project="bob").to_json_bytes(),
        b"{broken",
        make_event(project="alice").to_json_bytes(),
    ]
    bound = encode_chunk("events.alice", 0, [10, 11, 12, 13], values, frozenset({"alice"}))
    assert bound.rows == 2
    assert [(i, m.reason) for i, m in bound.invalid] == [
        (1, InvalidReason.PROJECT_NOT_BOUND_TO_TOPIC),
        (2, InvalidReason.BAD_JSON),  # a broken message keeps its own reason
    ]
    assert bound.invalid[0][1].source.offset == 11
    assert "'bob' is not bound to topic 'events.alice'" in bound.invalid[0][1].detail
    # No binding: every valid event passes, the same as before the binding existed.
    unbound = encode_raw(RawChunk("events.alice", 0, [10, 11, 12, 13], [None] * 4, values, 14))
    assert unbound.rows == 3 and [m.reason for _, m in unbound.invalid] == [InvalidReason.BAD_JSON]


def test_settings_check_the_binding_when_they_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RETRYLENS_PROJECT_TOPICS", '{"alice": ["events.alice"]}')
    assert load_settings().project_topics == {"alice": ["events.alice"]}
    monkeypatch.setenv("RETRYLENS_PROJECT_TOPICS", '{"alice": ["retrylens.events.dlq"]}')
    with pytest.raises(ConfigError, match="is the dead-letter topic"):
        load_settings()
    monkeypatch.setenv("RETRYLENS_PROJECT_TOPICS", "{alice")
    with pytest.raises(ConfigError, match="project_topics"):
        load_settings()


def test_the_writers_fallback_keeps_the_bindings_dead_letters_out() -> None:
    """A batch ClickHouse rejects is re-judged from its raw messages: a message the tenant
    binding refused must not come back as a row (the fallback would insert it)."""
    from factories import payload

    from retrylens.ingest.batch import Batch
    from retrylens.ingest.writer import native_rows

    raw = RawChunk("events.alice", 0, [0, 1], [None, None], [payload(project="alice"), payload(project="bob")],
                   commit_to=2, projects=frozenset({"alice"}))
    batch = Batch(max_rows=10, max_seconds=1.0)
    encoded = encode_raw(raw)
    batch.add(raw, encoded)
    assert encoded.rows == 1 and len(native_rows(batch)) == encoded.rows


def test_a_project_name_with_a_trailing_space_is_refused_too() -> None:
    """Leading and trailing spaces alike: "acme " would be a tenant no event names."""
    with pytest.raises(ConfigError, match="without surrounding spaces"):
        parse({"acme ": ["events.acme"]})
    with pytest.raises(ConfigError, match="without surrounding spaces"):
        parse({"acme\t": ["events.acme"]})


def test_only_the_dead_letter_topic_itself_is_refused_not_its_neighbours() -> None:
    """Topics sorting after and before the dead-letter topic's name are event topics."""
    binding = parse({"alice": [DLQ + ".x", "retrylens.events.dlp", "zeta"]})
    assert binding is not None
    assert binding.topics == (EVENTS, "retrylens.events.dlp", DLQ + ".x", "zeta")


def test_the_event_topic_bound_to_a_project_is_read_once_and_first() -> None:
    """Bound to the event topic itself (a value read from JSON: another str object than the
    setting's), among topics sorting before and after it."""
    event_topic = "".join(["retrylens.", "events"])  # built at run time, as a setting is
    binding = parse_project_topics(
        {"alice": ["a.first", EVENTS, "z.last"]}, event_topic=event_topic, dlq_topic=DLQ
    )
    assert binding is not None
    assert binding.topics == (EVENTS, "a.first", "z.last")
    assert binding.projects_for(EVENTS) == {"alice"}


@pytest.mark.parametrize(("count", "ellipsis"), [(9, False), (10, False), (11, True)])
def test_a_refusal_lists_at_most_ten_projects_and_says_when_there_are_more(count: int, ellipsis: bool) -> None:
    allowed = frozenset(f"p{i:02d}" for i in range(count))
    detail = refusal("z", "t", allowed)
    assert detail is not None
    listed = detail.split("allows: ", 1)[1].rstrip(")")
    names = [n for n in listed.split(", ") if n != "..."]
    assert names == sorted(allowed)[:10]
    assert listed.endswith(", ...") is ellipsis

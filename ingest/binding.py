"""Tenant binding: which projects may arrive on which Kafka topic (``project_topics``).

Kafka ACLs decide which principal may write which topic; they cannot look inside a
message. A producer allowed to write ``events.alice`` could still put ``project="bob"``
in its events and pollute bob's history. With a binding, the consumer accepts an event
only from a topic its project is bound to and dead-letters the rest with the reason
``project_not_bound_to_topic`` — so ACLs (principal → topic) plus this binding
(topic → projects) tie every stored event to a principal allowed to write it.

Everything here is pure and imports only the standard library and the error module, so
the settings can check a binding when they load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from retrylens.errors import ConfigError

__all__ = ["ProjectBinding", "parse_project_topics", "refusal"]

#: Kafka's own rule for topic names.
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class ProjectBinding:
    """Topic → the projects allowed on it; a topic no project names allows none."""

    allowed: Mapping[str, frozenset[str]]
    #: Topics the consumer reads: the event topic, then every bound topic.
    topics: tuple[str, ...]

    def projects_for(self, topic: str) -> frozenset[str]:
        """The projects an event read from ``topic`` may belong to (empty: none)."""
        return self.allowed.get(topic, frozenset())


def parse_project_topics(
    project_topics: Mapping[str, Sequence[str]], *, event_topic: str, dlq_topic: str
) -> ProjectBinding | None:
    """The binding of a ``project_topics`` setting (project → topics), or None when empty.

    Raises :class:`ConfigError` naming the bad entry: a project that is not a non-empty
    string, a topic list that is empty or not a list of valid topic names, or a binding of
    the dead-letter topic (consuming it as events would loop letters back into the store).
    """
    if not isinstance(project_topics, Mapping):
        raise ConfigError(f"project_topics: expected a JSON object project → [topics], got {type(project_topics).__name__}")
    if not project_topics:
        return None
    allowed: dict[str, set[str]] = {}
    for project, topics in project_topics.items():
        if not isinstance(project, str) or not project.strip() or project != project.strip():
            raise ConfigError(f"project_topics: project {project!r} must be a non-empty name without surrounding spaces")
        if isinstance(topics, str) or not isinstance(topics, Sequence) or not topics:
            raise ConfigError(f"project_topics[{project!r}]: expected a non-empty list of topics, got {topics!r}")
        for topic in topics:
            if not isinstance(topic, str) or not _TOPIC.match(topic) or topic in {".", ".."}:
                raise ConfigError(
                    f"project_topics[{project!r}]: {topic!r} is not a Kafka topic name "
                    "(1-249 of letters, digits, '.', '_', '-')"
                )
            if topic == dlq_topic:
                raise ConfigError(
                    f"project_topics[{project!r}]: {topic!r} is the dead-letter topic; bind event topics only"
                )
            allowed.setdefault(topic, set()).add(project)
    topics = (event_topic, *sorted(t for t in allowed if t != event_topic))
    return ProjectBinding({topic: frozenset(projects) for topic, projects in allowed.items()}, topics)


def refusal(project: str, topic: str, allowed: frozenset[str]) -> str | None:
    """Why an event of ``project`` read from ``topic`` is refused, or None if it is allowed."""
    if project in allowed:
        return None
    if not allowed:
        return f"project {project!r} arrived on topic {topic!r}, which no project is bound to (project_topics)"
    names = ", ".join(sorted(allowed)[:10]) + (", ..." if len(allowed) > 10 else "")
    return f"project {project!r} is not bound to topic {topic!r} (project_topics allows: {names})"

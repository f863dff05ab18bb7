"""The sidebar filters: time range, project, agent, phase, policy version, bucket, refresh.

Widget values only ever become a :class:`Slice` (bound parameters downstream). Initial
values can come from the URL (``?range=7d&project=shop``), so a view can be linked to.
The time window is computed when a fragment runs (:meth:`Filters.slice`), so an
auto-refreshing screen keeps sliding with the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import streamlit as st

from retrylens.analytics.filters import Bucket, Slice

from .source import DataSource
from .text import plain

RANGES: dict[str, tuple[str, timedelta | None]] = {
    "1h": ("Last hour", timedelta(hours=1)),
    "6h": ("Last 6 hours", timedelta(hours=6)),
    "24h": ("Last 24 hours", timedelta(hours=24)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "30d": ("Last 30 days", timedelta(days=30)),
    "all": ("All time", None),
}
DEFAULT_RANGE = "24h"
BUCKETS = ("auto", *(b.value for b in Bucket))
REFRESH = {"off": None, "10 s": 10, "30 s": 30, "60 s": 60}
DEFAULT_REFRESH = "30 s"
ANY = "(all)"
#: The project choice that reads every project (the default where there are several).
ALL_PROJECTS = "All projects"
_DIMENSIONS = ("project", "agent", "phase", "policy_version")


@dataclass(frozen=True)
class Filters:
    range_key: str = DEFAULT_RANGE
    project: str | None = None
    agent: str | None = None
    phase: str | None = None
    policy_version: str | None = None
    bucket: str = "auto"
    refresh_s: int | None = None

    def slice(self, now: datetime | None = None) -> Slice:
        window = RANGES[self.range_key][1]
        start = (now or datetime.now(UTC)) - window if window else None
        return Slice(project=self.project, agent=self.agent, phase=self.phase,
                     policy_version=self.policy_version, start=start)

    def trend_bucket(self) -> Bucket:
        if self.bucket != "auto":
            return Bucket(self.bucket)
        window = RANGES[self.range_key][1]
        if window is not None and window <= timedelta(hours=6):
            return Bucket.FIVE_MINUTES
        if window is not None and window <= timedelta(days=3):
            return Bucket.HOUR
        return Bucket.DAY if window is None or window <= timedelta(days=60) else Bucket.WEEK

    def describe(self) -> str:
        parts = [RANGES[self.range_key][0].lower()] + ([] if self.project else [ALL_PROJECTS.lower()])
        parts += [f"{name}={getattr(self, name)}" for name in _DIMENSIONS if getattr(self, name)]
        return ", ".join(parts)


def _from_url(key: str, name: str, allowed: list[str]) -> None:
    """Seed a widget's state from the URL once; unknown values are ignored."""
    if key in st.session_state:
        return
    value = st.query_params.get(name)
    if value in allowed:
        st.session_state[key] = value


@st.cache_data(ttl=30, show_spinner=False)
def _options(_source: DataSource, source_key: str, project: str | None, range_key: str) -> dict[str, list[str]]:
    window = RANGES[range_key][1]
    return _source.options(project, datetime.now(UTC) - window if window else None)


def options(source: DataSource, project: str | None = None, range_key: str = "all") -> dict[str, list[str]]:
    """Filter choices seen in the time range (cached for 30 s per source, project and range)."""
    try:
        return _options(source, str(getattr(source, "cache_key", id(source))), project, range_key)
    except Exception as exc:  # noqa: BLE001 - a failing source still gets a usable sidebar
        st.sidebar.warning(f"Filter choices unavailable: {plain(exc)}")
        return {name: [] for name in _DIMENSIONS}


def project_choices(source: DataSource, projects: list[str]) -> list[str]:
    """Projects a selectbox offers: "All projects" first (so the default) where there are
    several and the source can read across them."""
    return [ALL_PROJECTS, *projects] if source.cross_project and len(projects) != 1 else projects


def project_picker(source: DataSource, *, key: str = "f_project", where=st.sidebar,
                   range_key: str = "all") -> str | None:
    """A project selectbox (shared state with the sidebar filter); ``None`` means all projects."""
    allowed = project_choices(source, options(source, range_key=range_key).get("project", []))
    if not allowed:
        # The API lists only projects with configured keys; any project can still be typed.
        typed = where.text_input("Project", key=f"{key}_typed", value=st.query_params.get("project", ""),
                                 help="The server lists no projects (none has an API key configured): type one.")
        return typed.strip() or None
    _from_url(key, "project", allowed)
    if st.session_state.get(key) not in allowed:
        st.session_state.pop(key, None)
    chosen = where.selectbox("Project", allowed, key=key)
    return None if chosen in (None, ALL_PROJECTS) else chosen


def sidebar(source: DataSource, *, refresh: bool = True) -> Filters:
    """Draw the filters in the sidebar and return their values."""
    side = st.sidebar
    side.header("Filters")
    range_keys = list(RANGES)
    _from_url("f_range", "range", range_keys)
    st.session_state.setdefault("f_range", DEFAULT_RANGE)  # not index=: a URL value set the state already
    range_key = side.selectbox("Time range", range_keys, format_func=lambda k: RANGES[k][0], key="f_range")
    values: dict[str, str | None] = {"project": project_picker(source, range_key=range_key)}
    choices = options(source, values["project"], range_key)
    for name in _DIMENSIONS[1:]:
        allowed = [ANY, *choices.get(name, [])]
        _from_url(f"f_{name}", name, allowed)
        if st.session_state.get(f"f_{name}") not in allowed:
            st.session_state.pop(f"f_{name}", None)
        label = name.replace("_", " ").capitalize()
        chosen = side.selectbox(label, allowed, key=f"f_{name}")
        values[name] = None if chosen in (None, ANY) else chosen
    bucket = side.selectbox("Trend bucket", BUCKETS, key="f_bucket")
    refresh_s = None
    if refresh:
        refresh_label = side.selectbox("Auto-refresh", list(REFRESH), index=list(REFRESH).index(DEFAULT_REFRESH),
                                       key="f_refresh")
        refresh_s = REFRESH[refresh_label]
    return Filters(range_key=range_key, bucket=bucket, refresh_s=refresh_s, **values)

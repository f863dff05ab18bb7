"""Candidate policy files: YAML or JSON, validated by the SDK's own policy model.

A candidate file says what *changes* against the live policy: its mappings are merged
into the live policy key by key (``caps: {timeout: 1}`` changes the timeout cap and keeps
the others), then the whole result is validated by :func:`retrylens.sdk.core.policy.parse_policy`,
so a malformed file is rejected with a message that names the field. The live policy's
shadow section (candidate, exploration) is not inherited: a candidate is evaluated as it
would run live, without exploration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from retrylens.errors import CandidateError, PolicyError
from retrylens.sdk.core.policy import ALLOWANCE_FIELDS, RetryPolicy, parse_policy


@dataclass(frozen=True)
class Candidate:
    name: str
    policy: RetryPolicy
    source: str


def deep_merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def overlay(live: RetryPolicy, changes: dict[str, Any], *, source: str) -> RetryPolicy:
    """``live`` with ``changes`` merged in, validated; no shadow section inherited.

    A ``budget`` change that names ``max_attempts`` and none of the allowance fields is a
    fixed count of attempts, as :class:`~retrylens.sdk.core.policy.TaskBudget` reads such a
    budget: the live allowance fields are not inherited. Merged, they turned the count into
    a cap over the live allowance, so ``max_attempts: 8`` over a live ``max_attempts: 5``
    changed the field and not one attempt.
    """
    base = live.model_dump(mode="json")
    base.pop("shadow", None)
    if isinstance(changes, dict) and set(changes) == {"policy"}:
        changes = changes["policy"]
    if not isinstance(changes, dict):
        raise PolicyError(f"invalid policy ({source}): the changes must be a mapping of policy fields",
                          field="policy", source=source)
    budget = changes.get("budget") if isinstance(changes, dict) else None
    if (isinstance(budget, dict) and budget.get("max_attempts") is not None
            and not any(name in budget for name in ALLOWANCE_FIELDS) and isinstance(base.get("budget"), dict)):
        base["budget"] = {k: v for k, v in base["budget"].items() if k not in ALLOWANCE_FIELDS}
    return parse_policy(deep_merge(base, changes), source=source)


def read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise CandidateError(f"cannot read candidate policy {path}: {exc}", path=str(path)) from exc
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise CandidateError(f"candidate policy {path} is not valid YAML/JSON: {exc}", path=str(path)) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CandidateError(f"candidate policy {path}: the file must hold a mapping of policy fields",
                             path=str(path))
    return data


def load_candidate(path: str | Path, live: RetryPolicy) -> Candidate:
    """One candidate file merged over ``live``; raises :class:`CandidateError` naming the field."""
    path = Path(path)
    data = read_mapping(path)
    try:
        policy = overlay(live, data, source=str(path))
    except PolicyError as exc:
        field = getattr(exc, "field", None)
        where = f" (field '{field}')" if field else ""
        raise CandidateError(f"candidate policy {path}{where}: {exc}", path=str(path), field=field) from exc
    name = policy.id if "id" in data or "id" in data.get("policy", {}) else path.stem
    if name == live.id:
        name = path.stem
    return Candidate(name=name, policy=policy.model_copy(update={"id": name}), source=str(path))


def load_candidates(paths: list[str | Path], live: RetryPolicy) -> list[Candidate]:
    candidates = [load_candidate(p, live) for p in paths]
    names = [c.name for c in candidates]
    if len(set(names)) != len(names):
        raise CandidateError(f"candidate names must differ, got {names}", path=", ".join(map(str, paths)))
    return candidates


#: Fields that name a policy or steer its evaluation, not how it retries.
_NOT_BEHAVIOUR = ("id", "version", "shadow")


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        return {prefix: sorted(value, key=str)}  # a set of classes: order is not a change
    return {prefix: value}


def policy_changes(live: RetryPolicy, candidate: RetryPolicy) -> list[dict[str, Any]]:
    """Where ``candidate`` differs from ``live``: one ``{field, live, candidate}`` per changed leaf.

    Why: a recommendation that names a candidate ("aggressive") without saying what it
    changes cannot be acted on or reviewed. Names, versions and the shadow section are
    left out: they do not change how a task is retried.
    """
    a = _flatten({k: v for k, v in live.model_dump(mode="json").items() if k not in _NOT_BEHAVIOUR})
    b = _flatten({k: v for k, v in candidate.model_dump(mode="json").items() if k not in _NOT_BEHAVIOUR})
    return [{"field": key, "live": a.get(key), "candidate": b.get(key)}
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def describe_changes(changes: list[dict[str, Any]], *, limit: int = 8) -> str:
    """``caps.timeout 3 → 1, budget.max_attempts 5 → 3`` (``same as live`` when nothing differs)."""
    if not changes:
        return "same as live"
    words = [f"{c['field']} {_word(c['live'])} → {_word(c['candidate'])}" for c in changes[:limit]]
    more = len(changes) - limit
    return ", ".join(words) + (f" and {more} more" if more > 0 else "")


def _word(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)

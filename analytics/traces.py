"""Reading agent-trace files (the ``agent_traces`` JSONL format) as classifier examples.

Only what is known before a run starts becomes a feature: the task text, the system that
runs it (``source_subset``) and the model — through :func:`extract_input_features`, the
same function agents use for events. The outcome is the label; the trajectory is never
read. Records of one ``task_key`` (attempts at the same task) always land on the same side
of a cross-validation fold (:func:`.classifier.folds`), so a model cannot pass the test by
remembering a task's text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from retrylens.errors import TraceFormatError
from retrylens.sdk.text.features import FeatureValue, extract_input_features


@dataclass(frozen=True)
class TraceRecord:
    task_text: str
    agent: str
    model: str
    failed: bool
    task_key: str
    line: int

    def features(self) -> dict[str, FeatureValue]:
        return extract_input_features(self.task_text, agent=self.agent, model=self.model)


_OUTCOMES = {"success": False, "failure": True}


def _record(obj: Any, path: Path, line: int) -> TraceRecord:
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{path}:{line}: a trace record must be a JSON object")
    text = obj.get("task_text")
    if not isinstance(text, str) or not text.strip():
        raise TraceFormatError(f"{path}:{line}: task_text is missing or empty")
    outcome = obj.get("outcome")
    if outcome not in _OUTCOMES:
        raise TraceFormatError(f"{path}:{line}: outcome must be 'success' or 'failure', got {outcome!r}")
    agent = obj.get("source_subset") or obj.get("source") or ""
    return TraceRecord(
        task_text=text,
        agent=str(agent),
        model=str(obj.get("model") or ""),
        failed=_OUTCOMES[outcome],
        task_key=str(obj.get("task_key") or obj.get("trace_id") or text),
        line=line,
    )


def iter_traces(path: str | Path) -> Iterator[TraceRecord]:
    """Records of a JSONL trace file, in file order; blank lines are skipped."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise TraceFormatError(f"traces file {path} does not exist") from None
    except OSError as exc:
        raise TraceFormatError(f"cannot read traces file {path}: {exc.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise TraceFormatError(f"{path}:{number}: not valid JSON") from None
            yield _record(obj, path, number)


def read_traces(path: str | Path) -> list[TraceRecord]:
    records = list(iter_traces(path))
    if not records:
        raise TraceFormatError(f"traces file {path} holds no records")
    return records

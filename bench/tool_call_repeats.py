"""How often a real agent's tool call repeats the call just before it exactly.

Why: the loop signal ``repeated_tool_calls`` (``Attempt.tool_call``) counts such calls; this
measures how common they are in the shared real traces, with the SDK's own digest of
(name, canonical arguments). Usage: ``python bench/tool_call_repeats.py [traces.jsonl]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from retrylens.sdk.context import repeated_calls, tool_call_digest

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "agent_traces" / "dev.jsonl"


def measure(path: Path) -> dict[str, float]:
    calls = repeats = labelled = 0
    for line in path.read_text().splitlines():
        trace = json.loads(line)
        digests = [
            tool_call_digest(call["name"], call.get("arguments"))
            for step in trace["steps"]
            if step.get("kind") == "tool_call"
            for call in step.get("tool_calls") or []
        ]
        calls += len(digests)
        repeats += repeated_calls(digests)
        labelled += (trace.get("retry_stats") or {}).get("n_consecutive_identical_calls", 0)
    return {"tool_calls": calls, "repeats": repeats, "share": round(repeats / max(calls, 1), 4),
            "dataset_label_repeats": labelled}


if __name__ == "__main__":
    print(json.dumps(measure(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)))

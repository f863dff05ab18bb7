"""How often a real agent's tool call repeats the call just before it exactly.

Why: the loop signal ``repeated_tool_calls`` (``Attempt.tool_call``) counts such calls; this
measures how common they are in the shared real traces, with the SDK's own digest of
(name, canonical arguments). Usage: ``python bench/tool_call_repeats.py [traces.jsonl]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from retrylens.sdk.text.context import repeated_calls, tool_call_digest

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


#: ``--smoke``: two traces in the shared traces' shape, one of them repeating a call
SMOKE_TRACES = [
    {"steps": [{"kind": "tool_call", "tool_calls": [{"name": "orders.lookup", "arguments": {"id": 7}}]},
               {"kind": "tool_call", "tool_calls": [{"name": "orders.lookup", "arguments": {"id": 7}}]}],
     "retry_stats": {"n_consecutive_identical_calls": 1}},
    {"steps": [{"kind": "message"}, {"kind": "tool_call", "tool_calls": [{"name": "search", "arguments": {}}]}]},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--json", action="store_true", help="accepted: the figures are always one JSON object")
    parser.add_argument("--smoke", action="store_true", help="two built-in traces instead of a file")
    args = parser.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "traces.jsonl"
            path.write_text("".join(json.dumps(t) + "\n" for t in SMOKE_TRACES))
            print(json.dumps(measure(path)))
        return
    print(json.dumps(measure(args.traces)))


if __name__ == "__main__":
    main()

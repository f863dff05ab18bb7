"""``observe()`` in a short script: the events of its last call reach the spool before the
process exits, although the user holds no emitter to close (the one-line promise)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion

from retrylens.sdk.transport.spool import Spool


def spooled_kinds(data_dir: Path) -> list[str]:
    kinds: list[str] = []
    for folder in sorted(p for p in (data_dir / "spool").rglob("*") if p.is_dir()):
        for record in Spool(folder, writer=False).read(max_records=10_000):
            kinds.append(json.loads(record.value)["kind"])
    return kinds


def test_the_last_observed_call_of_a_script_is_in_the_spool_after_it_exits(tmp_path: Path) -> None:
    script = [RATE_LIMITED, RATE_LIMITED, Reply(200, {}, openai_completion())]
    with FakeProvider(script) as fake:
        code = textwrap.dedent(
            f"""
            import openai
            import retrylens.sdk
            retrylens.sdk.observe()
            client = openai.OpenAI(base_url="{fake.url}/v1", api_key="sk-test")
            messages = [{{"role": "user", "content": "hi"}}]
            print(client.chat.completions.create(model="m", messages=messages).choices[0].message.content)
            """
        )
        env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path)}
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
        )
        assert out.returncode == 0, out.stderr
        assert fake.count == 3
    kinds = spooled_kinds(tmp_path)
    assert kinds.count("attempt_failed") == 2, kinds
    assert kinds.count("attempt_succeeded") == 1, kinds
    assert kinds.count("task_finished") == 1, kinds

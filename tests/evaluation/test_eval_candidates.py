"""Candidate policy files: merged over the live policy, malformed ones named precisely."""

from __future__ import annotations

import json

import pytest
from eval_helpers import EXAMPLES

from retrylens.evaluation.candidates import CandidateError, load_candidate, load_candidates
from retrylens.schemas import ErrorType
from retrylens.sdk.core.policy import RetryPolicy

LIVE = RetryPolicy(id="live", version="7", fallbacks={"gpt-4o": "gpt-4o-mini"},
                   shadow={"candidate": {"caps": {"timeout": 1}}, "exploration": 0.1})


def test_candidate_changes_only_what_it_names(tmp_path) -> None:
    path = tmp_path / "lower.yaml"
    path.write_text("caps: {timeout: 1}\nbudget: {max_attempts: 3}\n")
    policy = load_candidate(path, LIVE).policy
    assert policy.cap(ErrorType.TIMEOUT) == 1 and policy.cap(ErrorType.RATE_LIMIT) == LIVE.cap(ErrorType.RATE_LIMIT)
    assert policy.budget.max_attempts == 3 and policy.fallbacks == LIVE.fallbacks


def test_candidate_runs_without_the_live_shadow_and_exploration(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"degrade_after": 3}))
    policy = load_candidate(path, LIVE).policy
    assert policy.shadow.candidate is None and policy.shadow.exploration == 0


def test_examples_load_with_their_own_names() -> None:
    names = [c.name for c in load_candidates([EXAMPLES / "conservative.yaml", EXAMPLES / "aggressive.yaml"], LIVE)]
    assert names == ["conservative", "aggressive"]


@pytest.mark.parametrize(("text", "field"), [
    ("budget: {max_atempts: 3}\n", "budget.max_atempts"),
    ("caps: {timeout: -1}\n", "caps.timeout"),  # the field itself, since caps are NonNegativeInt
    ("backoff: {jitter: 3}\n", "backoff.jitter"),
    ("caps: {timout: 2}\n", "caps.timout.[key]"),
])
def test_malformed_candidate_names_the_field(tmp_path, text, field) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CandidateError) as info:
        load_candidate(path, LIVE)
    assert info.value.field == field and f"'{field}'" in str(info.value) and "bad.yaml" in str(info.value)


@pytest.mark.parametrize("text", ["caps: [1, 2\n", "- just\n- a list\n"])
def test_unreadable_candidate_is_rejected_with_the_file_named(tmp_path, text) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(CandidateError, match="broken.yaml"):
        load_candidate(path, LIVE)

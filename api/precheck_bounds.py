"""How many extra features a pre-check may send, and how long each may be.

The pre-check scores on the event loop (:mod:`.precheck`): its cost grows with the agent's
``features``, which the SDK's request model leaves open. Four requests of 100,000 features
blocked ``/healthz`` for 8 s. The route's body model declares these bounds (so clients and
fuzzers see them in the OpenAPI schema) and :func:`bounded_features`, a dependency, refuses
a body past them with a 422 naming the bound before the body model walks every entry (it
validates all of a dict's items before its length).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import StringConstraints

#: The SDK sends a few dozen (tools, model, phase); an agent adding its own stays far below.
MAX_FEATURES = 512
MAX_FEATURE_NAME_CHARS = 200
MAX_FEATURE_TEXT_CHARS = 1_000

FeatureName = Annotated[str, StringConstraints(max_length=MAX_FEATURE_NAME_CHARS)]
FeatureText = Annotated[str, StringConstraints(max_length=MAX_FEATURE_TEXT_CHARS)]
FeatureValue = bool | int | float | FeatureText


def too_many_features(features: Any) -> str | None:
    """Why ``features`` (the body's value) is past the bounds, or ``None`` (other shapes are the model's to judge)."""
    if not isinstance(features, dict):
        return None
    if len(features) > MAX_FEATURES:
        return f"{len(features)} features sent; at most {MAX_FEATURES} are scored"
    long_name = next((name for name in features if isinstance(name, str) and len(name) > MAX_FEATURE_NAME_CHARS), None)
    if long_name is not None:
        return f"a feature name of {len(long_name)} characters; at most {MAX_FEATURE_NAME_CHARS}"
    long_text = next((name for name, value in features.items()
                      if isinstance(value, str) and len(value) > MAX_FEATURE_TEXT_CHARS), None)
    if long_text is not None:
        return f"feature {long_text!r} has {len(features[long_text])} characters; at most {MAX_FEATURE_TEXT_CHARS}"
    return None


async def bounded_features(request: Request) -> None:
    """422 for a pre-check whose ``features`` are past the bounds, read from the body FastAPI has
    already parsed (cached on the request), before the body model validates each entry."""
    try:
        body = await request.json()
    except ValueError:
        return  # malformed JSON: the body model's 422 says so
    reason = too_many_features(body.get("features")) if isinstance(body, dict) else None
    if reason is not None:
        raise RequestValidationError([{"loc": ("body", "features"), "msg": reason, "type": "too_long"}])

"""How many extra features a pre-check may send, and how long each may be.

The pre-check scores on the event loop (:mod:`.precheck`): its cost grows with the agent's
``features``, which the SDK's request model leaves open. Four requests of 100,000 features
blocked ``/healthz`` for 8 s. The route's body model declares these bounds (so clients and
fuzzers see them in the OpenAPI schema) and :func:`bounded_features`, a dependency, refuses
a body past them with a 422 naming the bound before the body model walks every entry (it
validates all of a dict's items before its length).

Parsing the JSON itself holds the interpreter too (~30 ms for a 1 MiB body of 80,000
features on a quiet machine, ~100 ms on a busy one), so a body larger than any ordinary
pre-check (:data:`INLINE_JSON_BYTES`) is parsed and judged in the worker process
(:class:`BoundedJSONRoute`, :mod:`.offload`); what comes back is bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import StringConstraints

from .offload import in_worker

#: The SDK sends a few dozen (tools, model, phase); an agent adding its own stays far below.
MAX_FEATURES = 512
MAX_FEATURE_NAME_CHARS = 200
MAX_FEATURE_TEXT_CHARS = 1_000
#: A pre-check body up to this size is parsed on the event loop (well under a millisecond).
INLINE_JSON_BYTES = 64 * 1024

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


def parsed_and_judged(body: bytes) -> tuple[Any, str | None]:
    """The body parsed, and why its features are refused (``None``: they are not); refused
    features are left out of what is returned, so what crosses back from the worker is small."""
    parsed = json.loads(body)
    reason = too_many_features(parsed.get("features")) if isinstance(parsed, dict) else None
    return ({**parsed, "features": {}} if reason else parsed), reason


class _OffLoopJSON(Request):
    """A request whose large JSON body is parsed (and its features judged) in the worker process."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if len(body) <= INLINE_JSON_BYTES:
                self._json = json.loads(body)
            else:
                self._json, reason = await in_worker(parsed_and_judged, body)
                if reason is not None:
                    self.state.refused_features = reason
        return self._json


class BoundedJSONRoute(APIRoute):
    """A route whose JSON body, when large, is parsed off the event loop (:class:`_OffLoopJSON`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def off_loop(request: Request) -> Response:
            return await handler(_OffLoopJSON(request.scope, request.receive))

        return off_loop


async def bounded_features(request: Request) -> None:
    """422 for a pre-check whose ``features`` are past the bounds, read from the body FastAPI has
    already parsed (cached on the request; judged in the worker for a large body), before the
    body model validates each entry."""
    reason = getattr(request.state, "refused_features", None)
    if reason is None:
        try:
            body = await request.json()
        except ValueError:
            return  # malformed JSON: the body model's 422 says so
        reason = too_many_features(body.get("features")) if isinstance(body, dict) else None
    if reason is not None:
        raise RequestValidationError([{"loc": ("body", "features"), "msg": reason, "type": "too_long"}])

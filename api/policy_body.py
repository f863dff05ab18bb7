"""What a policy PUT takes: its declared JSON schema and the one check that enforces it.

The body is validated by the SDK's own parser (:func:`retrylens.sdk.core.policy.parse_policy`),
so what the document declares is derived from the same model, :class:`RetryPolicy`, and
then adjusted to what the server really does, so that a schema-valid body is stored and
anything else is a 422 naming the field:

- types are exact (the parser runs ``strict``: no ``"3"`` for 3, no ``0`` for false),
  except that ``2.0`` is an integer, as JSON Schema counts it;
- no field outside the model (``additionalProperties: false``), either as the policy
  itself or under a single top-level ``policy`` key;
- integers fit in 64 bits (the stored document is JSON that agents parse back);
- sets (``retryable``, ``kill_switch.agents``) take duplicates, which collapse, so the
  schema does not claim ``uniqueItems``;
- ``shadow.candidate`` is a partial policy (its fields override the live one's when the
  candidate is evaluated), checked now rather than when an agent first evaluates it.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from retrylens.errors import PolicyError
from retrylens.sdk.core.policy import RetryPolicy, parse_policy

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``#/$defs/…`` reference replaced by its definition (the model is not recursive)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline({**defs[ref.removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}},
                           defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("$defs", "uniqueItems")}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def _bound_integers(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "integer":
            node.setdefault("minimum", INT64_MIN)
            node.setdefault("maximum", INT64_MAX)
        for value in node.values():
            _bound_integers(value)
    elif isinstance(node, list):
        for item in node:
            _bound_integers(item)


@cache
def _policy_schema() -> dict[str, Any]:
    schema = RetryPolicy.model_json_schema()
    policy = _inline(schema, schema.get("$defs", {}))
    _bound_integers(policy)
    candidate = copy.deepcopy(policy)
    del candidate["properties"]["shadow"]
    candidate.update(title="Candidate", description="Fields of a policy that replace the live one's when the "
                     "shadow candidate is evaluated (no nested shadow).")
    policy["properties"]["shadow"]["properties"]["candidate"] = {
        "anyOf": [candidate, {"type": "null"}], "default": None, "title": "Candidate"}
    return policy


def policy_body_schema() -> dict[str, Any]:
    """The request body of ``PUT /v1/policies/…``: a policy, or ``{"policy": <policy>}``."""
    policy = _policy_schema()
    envelope = {"type": "object", "title": "PolicyEnvelope", "required": ["policy"],
                "properties": {"policy": policy}, "additionalProperties": False}
    return {"anyOf": [policy, envelope], "title": "PolicyDocument",
            "description": "A retry policy document (the SDK's RetryPolicy fields; optionally under a top-level "
            "`policy` key). Unset fields take their defaults; a missing `version` becomes the revision number."}


def _too_large(value: Any, path: str) -> str | None:
    """The dotted path of the first integer outside 64 bits in ``value``, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _too_large(child, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _branch(schema: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The part of ``schema`` (itself or one ``anyOf`` branch) that describes a JSON ``kind``."""
    for option in [schema, *schema.get("anyOf", [])]:
        if option.get("type") == kind:
            return option
    return None


def _integral_floats_as_ints(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with ``2.0`` read as ``2`` where ``schema`` wants an integer (JSON Schema's own rule)."""
    if isinstance(value, float) and value.is_integer() and _branch(schema, "integer") is not None:
        return int(value)
    if isinstance(value, dict) and (shape := _branch(schema, "object")) is not None:
        fields, rest = shape.get("properties", {}), shape.get("additionalProperties")
        return {k: _integral_floats_as_ints(v, fields.get(k) or (rest if isinstance(rest, dict) else {}))
                for k, v in value.items()}
    if isinstance(value, list) and (shape := _branch(schema, "array")) is not None:
        return [_integral_floats_as_ints(item, shape.get("items", {})) for item in value]
    return value


def validate_body(data: Any, *, source: str) -> RetryPolicy:
    """The policy ``data`` declares, exactly as :func:`policy_body_schema` states; else ``PolicyError``."""
    enveloped = isinstance(data, dict) and set(data) == {"policy"}
    if enveloped:
        data = {"policy": _integral_floats_as_ints(data["policy"], _policy_schema())}
    else:
        data = _integral_floats_as_ints(data, _policy_schema())
    where = _too_large(data, "")
    if where is not None:
        raise PolicyError(f"invalid policy ({source}): {where}: an integer must fit in 64 bits", field=where,
                          source=source)
    try:
        policy = parse_policy(data, source=source, strict=True)
    except PolicyError as exc:
        if not enveloped:
            raise
        raise PolicyError(str(exc), field=f"policy.{exc.field}".removesuffix("."), source=source) from None
    candidate = policy.shadow.candidate
    if candidate is not None:
        prefix = "policy.shadow.candidate" if enveloped else "shadow.candidate"
        if "shadow" in candidate:
            raise PolicyError(f"invalid policy ({source}): {prefix}.shadow: a candidate has no shadow of its own",
                              field=f"{prefix}.shadow", source=source)
        try:
            parse_policy(candidate, source=f"{source} {prefix}", strict=True)
        except PolicyError as exc:
            raise PolicyError(str(exc), field=f"{prefix}.{exc.field}", source=source) from None
    return policy

"""What an attempt spent: tokens, money, latency — reported, or read off a model's answer.

Budgets (``max_tokens``, ``max_cost_usd``) can only work if attempts say what they spent.
An attempt reports a :class:`Usage` (``attempt.report(...)``), or the governed function
returns an answer that carries one: :func:`usage_of` reads the common shapes (OpenAI and
Anthropic ``usage``, LangChain ``usage_metadata`` / ``response_metadata['token_usage']``
/ ``llm_output['token_usage']``, a dict with a ``usage`` key) without importing any SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator


@dataclass(frozen=True, slots=True)
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_ms: int | None = None

    def __add__(self, other: Usage) -> Usage:
        latency = (
            None
            if self.latency_ms is None and other.latency_ms is None
            else (self.latency_ms or 0) + (other.latency_ms or 0)
        )
        return Usage(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost_usd + other.cost_usd,
            latency,
        )

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out


_PLAIN = (str, bytes, int, float, bool, type(None), list, tuple)
_IN = ("input_tokens", "prompt_tokens", "tokens_in", "prompt_token_count")
_OUT = ("output_tokens", "completion_tokens", "tokens_out", "candidates_token_count")


def _get(obj: Any, name: str) -> Any:
    """``obj[name]`` or ``obj.name``, ``None`` when absent.

    Why not plain ``getattr(obj, name, None)``: most names asked here are absent, and on a
    pydantic model (every openai/anthropic answer) an absent attribute goes through the
    model's ``__getattr__`` and a raised AttributeError, several µs each, paid on every
    observed or governed call. So the class, the instance's fields and pydantic's extra
    fields are looked at directly, and ``__getattr__`` is asked only by other classes.
    """
    if isinstance(obj, dict):
        return obj.get(name)
    cls = type(obj)
    if _on_class(cls, name):  # a property, slot or class attribute (or its instance value)
        return getattr(obj, name, None)
    fields = getattr(obj, "__dict__", None)
    if fields is not None and name in fields:
        return fields[name]
    if _on_class(cls, "__pydantic_extra__"):  # a pydantic model: extras are its only other names
        extra = obj.__pydantic_extra__
        return extra.get(name) if isinstance(extra, dict) else None
    if _on_class(cls, "__getattr__"):  # names made on demand
        return getattr(obj, name, None)
    return None


def _holders(value: Any) -> Iterator[Any]:
    yield _get(value, "usage")
    yield _get(value, "usage_metadata")
    yield _get(_get(value, "response_metadata"), "token_usage")
    yield _get(_get(value, "llm_output"), "token_usage")


_CLASS_NAMES: dict[tuple[type, str], bool] = {}


def _on_class(cls: type, name: str) -> bool:
    """Whether ``cls`` or a base defines ``name`` (memoised: ``hasattr`` on a pydantic model
    class runs its metaclass's ``__getattr__`` and raises for every absent name)."""
    key = (cls, name)
    found = _CLASS_NAMES.get(key)
    if found is None:
        found = any(name in vars(base) for base in cls.__mro__)
        if len(_CLASS_NAMES) > 4096:  # classes made on the fly: keep the memo bounded
            _CLASS_NAMES.clear()
        _CLASS_NAMES[key] = found
    return found


def _from_counts(obj: Any) -> Usage | None:
    if obj is None or isinstance(obj, _PLAIN):
        return None
    if isinstance(obj, Usage):
        return obj
    tokens_in = next((v for k in _IN if isinstance(v := _get(obj, k), int)), None)
    tokens_out = next((v for k in _OUT if isinstance(v := _get(obj, k), int)), None)
    cost = _get(obj, "cost_usd")
    if tokens_in is None and tokens_out is None and not isinstance(cost, int | float):
        return None
    return Usage(
        tokens_in or 0, tokens_out or 0, float(cost) if isinstance(cost, int | float) else 0.0
    )


def usage_of(value: Any) -> Usage | None:
    """The usage ``value`` carries (an answer, a usage object, a :class:`Usage`), or ``None``."""
    if value is None or type(value) in _PLAIN:
        return None
    if isinstance(value, Usage):
        return value
    for holder in _holders(value):  # lazily: most answers carry ``usage``, the first asked
        found = _from_counts(holder)
        if found is not None:
            cost = _get(value, "cost_usd")  # a provider answer may carry its price beside usage
            if not found.cost_usd and isinstance(cost, int | float) and not isinstance(cost, bool):
                return Usage(found.tokens_in, found.tokens_out, float(cost), found.latency_ms)
            return found
    return _from_counts(value)

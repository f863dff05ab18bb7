"""The simulated fleet's fault model: a documented YAML scenario, validated by pydantic.

The comparison between retry strategies is only as honest as this model, so every
number lives in the scenario file (``default_scenario.yaml`` documents where each one
comes from) and a malformed file is rejected with the offending field named.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from retrylens.errors import ConfigError
from retrylens.schemas import ErrorType

Probability = float


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dependency(_M):
    """A model or tool: fault rates per call, latency, price, limits."""

    kind: Literal["model", "tool"]
    timeout: Probability = Field(default=0.0, ge=0, le=1)
    rate_limit: Probability = Field(default=0.0, ge=0, le=1)
    server_error: Probability = Field(default=0.0, ge=0, le=1)
    network: Probability = Field(default=0.0, ge=0, le=1)
    latency_ms: int = Field(default=500, ge=1)
    timeout_ms: int = Field(default=30_000, ge=1)
    retry_after_ms: tuple[int, int] = (1_000, 8_000)
    rate_limited_repeat: Probability = Field(default=0.9, ge=0, le=1,
                                             description="429 again when called before Retry-After passed")
    context_limit_tokens: int = Field(default=128_000, ge=256)
    usd_per_1k_in: float = Field(default=0.0, ge=0)
    usd_per_1k_out: float = Field(default=0.0, ge=0)
    quality: float = Field(default=1.0, gt=0, description="output faults are divided by this")
    fallback: str | None = None


class Outage(_M):
    dependency: str
    start: float = Field(ge=0, le=1, description="fraction of the simulated span")
    duration: float = Field(gt=0, le=1)
    error: Literal["timeout", "server_error", "network", "rate_limit"] = "server_error"
    rate: Probability = Field(ge=0, le=1)


class SideEffectSpec(_M):
    kind: Literal["payment", "db_rows"]
    commit_before_timeout: Probability = Field(default=0.5, ge=0, le=1,
                                               description="share of timeouts after which the effect happened")
    partial_failure: Probability = Field(default=0.0, ge=0, le=1, description="db_rows: some rows then an error")
    rows: tuple[int, int] = (5, 50)


class Step(_M):
    name: str
    phase: Literal["planning", "execution", "answer"]
    dependency: str = Field(description="a dependency name, or 'model' for the agent's model")
    side_effect: str | None = None
    structured_output: bool = False


class Template(_M):
    """A family of task inputs; keywords and sizes in it really change the fault rates."""

    name: str
    project: str
    agent: str
    role: str = "executor"
    weight: float = Field(default=1.0, gt=0)
    model: str
    text: str
    values: dict[str, list[str]] = Field(default_factory=dict)
    size_tokens: tuple[int, int] = (200, 2_000)
    tools: list[str] = Field(default_factory=list)
    steps: list[Step] = Field(min_length=1)
    schema_mismatch: Probability = Field(default=0.05, ge=0, le=1)
    validation: Probability = Field(default=0.02, ge=0, le=1)
    planning_failure: Probability = Field(default=0.02, ge=0, le=1)
    logic_markers: list[str] = Field(default_factory=list,
                                     description="inputs containing one always hit a logic error")
    keyword_risk: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="keyword → {fault: multiplier} (schema_mismatch, validation, planning_failure)"
    )
    recurring_share: Probability = Field(default=0.2, ge=0, le=1)


class ModelBehaviour(_M):
    patch_fix: Probability = Field(default=0.7, ge=0, le=1, description="share of schema mismatches a patched prompt avoids")
    relaxed_fix: Probability = Field(default=0.8, ge=0, le=1, description="share avoided by relaxed output + post-processing")
    relaxed_planning_fix: Probability = Field(default=0.3, ge=0, le=1)
    failure_summary_fix: Probability = Field(default=0.3, ge=0, le=1, description="validation/logic-free faults a clean context with a failure note avoids")
    output_tokens: tuple[int, int] = (150, 600)


class Pollution(_M):
    weight: float = Field(default=0.6, ge=0, le=1, description="p_fail' = p + (1-p)·weight·pollution")


class Shadow(_M):
    candidate: dict[str, Any] | None = None
    exploration: float = Field(default=0.0, ge=0, le=0.5)
    explore_stops: float = Field(default=0.0, ge=0, le=0.5)


class Naive(_M):
    retries: int = Field(default=3, ge=0)
    delay_ms: int = Field(default=1_000, ge=0)


class Scenario(_M):
    name: str
    description: str = ""
    sources: list[str] = Field(default_factory=list)
    span_hours: float = Field(default=24.0, gt=0)
    dependencies: dict[str, Dependency]
    outages: list[Outage] = Field(default_factory=list)
    side_effects: dict[str, SideEffectSpec] = Field(default_factory=dict)
    templates: list[Template] = Field(min_length=1)
    model_behaviour: ModelBehaviour = ModelBehaviour()
    pollution: Pollution = Pollution()
    naive: Naive = Naive()
    policy: dict[str, Any] = Field(default_factory=dict, description="the governor's RetryPolicy fields")
    shadow: Shadow = Shadow()

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        for i, template in enumerate(self.templates):
            if template.model not in self.dependencies:
                raise ValueError(f"templates.{i}.model: unknown dependency {template.model!r}")
            for j, step in enumerate(template.steps):
                if step.dependency != "model" and step.dependency not in self.dependencies:
                    raise ValueError(f"templates.{i}.steps.{j}.dependency: unknown dependency {step.dependency!r}")
                if step.side_effect and step.side_effect not in self.side_effects:
                    raise ValueError(f"templates.{i}.steps.{j}.side_effect: unknown side effect {step.side_effect!r}")
        for i, outage in enumerate(self.outages):
            if outage.dependency not in self.dependencies:
                raise ValueError(f"outages.{i}.dependency: unknown dependency {outage.dependency!r}")
        for name, dep in self.dependencies.items():
            if dep.fallback and dep.fallback not in self.dependencies:
                raise ValueError(f"dependencies.{name}.fallback: unknown dependency {dep.fallback!r}")
        return self

    def fallbacks(self) -> dict[str, str]:
        return {name: dep.fallback for name, dep in self.dependencies.items() if dep.fallback}


def _describe(exc: ValidationError, source: str) -> str:
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'scenario'}: {e['msg']}" for e in exc.errors()[:5])
    return f"invalid scenario ({source}): {problems}"


def parse_scenario(data: Any, *, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ConfigError(f"invalid scenario ({source}): the file must hold a mapping")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from exc


def load_scenario(path: str | Path | None = None) -> Scenario:
    """The scenario in ``path`` (YAML), or the packaged default scenario."""
    if path is None:
        text = resources.files(__package__).joinpath("default_scenario.yaml").read_text()
        source = "default_scenario.yaml"
    else:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read scenario {path}: {exc}") from exc
        source = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"scenario {source} is not valid YAML: {exc}") from exc
    return parse_scenario(data, source=source)


ERROR_FIELDS = (ErrorType.TIMEOUT, ErrorType.RATE_LIMIT, ErrorType.SERVER_ERROR, ErrorType.NETWORK)

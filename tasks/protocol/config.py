"""What a forecasting run computes: every choice that changes its numbers, with its default.

:class:`ForecastConfig` is the one place these defaults are said. The flows take it (extended
with where and how to run, in ``wadiro_fleet.flows.settings``) as their parameters, the command
line builds its options from its fields, and the ``runs`` table records it.

The defaults are the configuration that won ``benchmarks/forecast_quality.py`` (README,
"Forecast quality"): the ``recent_change`` features and the residual target. The paper's own
protocol is ``feature_set="paper", target="load", bound_target_week=False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from wadiro_fleet.tasks.protocol.certification import DEFAULT_PERTURBATION
from wadiro_fleet.tasks.protocol.features import (
    FEATURE_SETS,
    FEATURES,
    get_feature_set,
)
from wadiro_fleet.tasks.protocol.models import MODEL_NAMES, MODELS, check_model_names

TuningMode = Literal["per-window", "reuse"]
Target = Literal["load", "residual"]


def parse_perturbation(items: Sequence[str]) -> dict[str, float]:
    """``["temperature_c=1", ...]`` -> ``{"temperature_c": 1.0}``, names and radii checked."""
    radii: dict[str, float] = {}
    for item in items:
        name, sep, radius = str(item).partition("=")
        name = name.strip()
        if not sep or name not in FEATURES:
            raise ValueError(f"perturbation {item!r}: expected FEATURE=RADIUS with FEATURE one "
                             f"of {sorted(FEATURES)}")
        try:
            value = float(radius)
        except ValueError:
            raise ValueError(f"perturbation {item!r}: the radius is not a number") from None
        if not value >= 0 or value == float("inf"):
            raise ValueError(f"perturbation {item!r}: the radius must be finite and >= 0")
        radii[name] = value
    return radii


def _default_model_options() -> dict[str, dict[str, Any]]:
    return {name: dict(spec.options) for name, spec in MODELS.items() if spec.options}


class ForecastConfig(BaseModel):
    """Every choice of a run that changes its results (recorded in the ``runs`` table)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: tuple[str, ...] = Field(
        MODEL_NAMES, description=f"Models to run (default: all): {', '.join(MODEL_NAMES)}."
    )
    trials: int = Field(15, ge=1, description="TPE trials per model and window.")
    tuning: TuningMode = Field(
        "per-window",
        description="per-window: tune every window; reuse: refit with the latest stored "
        "hyperparameters (tune when there are none or they are too old).",
    )
    feature_set: str = Field(
        "recent_change",
        description=f"Named feature set ({', '.join(FEATURE_SETS)}); paper is the paper's eight.",
    )
    target: Target = Field(
        "residual",
        description="What the learned models predict: the load itself (the paper) or the "
        "residual, the correction to last week's load at the same hour.",
    )
    bound_target_week: bool = Field(
        True,
        description="Impose the physical bound (no negative load) of the constrained network on "
        "the target week's inputs too, inside its training program, so its forecasts never go "
        "below zero; the paper bounds the training rows only.",
    )
    reuse_max_age_weeks: int = Field(
        8, ge=0, description="Oldest stored tuning that --tuning reuse accepts, in weeks."
    )
    history_weeks: int = Field(
        12, ge=2, description="Weeks of history before the target week (the last validates)."
    )
    model_options: dict[str, dict[str, Any]] = Field(
        default_factory=_default_model_options,
        description="Fixed constructor arguments per model, not tuned (e.g. the solver).",
    )

    perturbation: tuple[str, ...] = Field(
        tuple(f"{name}={radius:g}" for name, radius in DEFAULT_PERTURBATION.items()),
        description="Stability certificate of each SCNN-family fit: the input perturbation "
        "as FEATURE=RADIUS in the feature's own units (an l_inf box); features not listed "
        "(the calendar) are held fixed.",
    )
    certify_nodes: int = Field(
        100, ge=0, description="Branch-and-bound nodes the stability certificate of each "
        "SCNN-family fit may use (past them, an upper bound is recorded; a node budget keeps "
        "reruns identical, a time limit would not); 0 turns certification off.",
    )

    max_l_eps: float | None = Field(
        None, gt=0, description="Publish an SCNN-family forecast only when its stability "
        "certificate L_eps (kWh) is at most this (default: no requirement).",
    )

    @field_validator("perturbation", mode="before")
    @classmethod
    def _feature_radii(cls, value: Sequence[str]) -> tuple[str, ...]:
        if isinstance(value, str):
            raise ValueError("perturbation must be a sequence of FEATURE=RADIUS, not one string")
        radii = parse_perturbation(value)
        return tuple(f"{name}={radius:g}" for name, radius in radii.items())

    @property
    def perturbation_radii(self) -> dict[str, float]:
        """:attr:`perturbation` as feature -> radius."""
        return parse_perturbation(self.perturbation)

    @field_validator("models", mode="before")
    @classmethod
    def _known_models(cls, value: Sequence[str]) -> tuple[str, ...]:
        return check_model_names(value)

    @field_validator("feature_set")
    @classmethod
    def _known_feature_set(cls, value: str) -> str:
        try:
            return get_feature_set(value).name
        except LookupError as exc:
            raise ValueError(str(exc)) from None

    def forecast_config(self) -> ForecastConfig:
        """Only the fields of :class:`ForecastConfig` (subclasses add where and how to run)."""
        return ForecastConfig(**{name: getattr(self, name) for name in ForecastConfig.model_fields})

    PROTOCOL_FIELDS: ClassVar[tuple[str, ...]] = (
        "feature_set", "target", "bound_target_week", "history_weeks", "model_options")
    """The fields that, with a model's hyperparameters, decide what its forecast is: a forecast
    issued under other values is not this configuration's forecast."""

    def protocol_record(self) -> dict[str, Any]:
        """:attr:`PROTOCOL_FIELDS` as they are recorded in ``runs.parameters`` (JSON values)."""
        return self.model_dump(mode="json", include=set(self.PROTOCOL_FIELDS))

    def as_record(self) -> dict[str, Any]:
        """JSON-ready parameters for the ``runs`` table, search spaces included."""
        record = self.model_dump(mode="json")
        record["search_spaces"] = {
            m: {p: repr(d) for p, d in MODELS[m].search_space.items()} for m in self.models
        }
        return record


__all__ = ["ForecastConfig", "Target", "TuningMode", "parse_perturbation"]

"""A forecasting run's settings: what it computes, over which buildings, where it runs.

One definition serves every entry point. The flows take a settings object as one parameter
(``settings``), the deployments in ``prefect.yaml`` take the flows' defaults, and the command
line has an option per field, the forecast's flattened beside the run's (cyclopts'
``Parameter(name="*")``, :mod:`flows.cli_forecasting`). What a run computes is its
:class:`~tasks.protocol.config.ForecastConfig` (``forecast``), held, not inherited:
the protocol's tasks receive it alone. The weekly run and a backfill share every default; how
they tune is the protocol's (the deployed one reuses recent tuning, the paper's tunes every
window).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from cyclopts import Parameter
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from tasks.protocol.comma_lists import CommaList
from tasks.protocol.config import ForecastConfig
from tasks.warehouse.connection import WAREHOUSE_ENV, default_warehouse

RunnerKind = Literal["threads", "processes", "dask"]

MAX_AUTO_BATCH = 10
"""The default batch's largest size: at a weekly run's cost per building-week (about a second)
ten buildings make each batch's reading, staging and writing (a tenth of a second or two) a few
per cent of its work."""


WarehousePath = Annotated[str, WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "null"}]})]
"""A warehouse file; ``null`` in a flow's parameters (its schema allows it) means the default,
read where the run starts."""


class RunSettings(BaseModel):
    """What a run computes (``forecast``), and the warehouse, the buildings and the task runner.

    The forecast's fields may also be given beside the run's (``RunSettings(trials=3,
    runner="threads")``), as the command line gives them and as a deployment's parameters
    may: they are gathered into ``forecast``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    forecast: Annotated[ForecastConfig, Parameter(name="*")] = Field(
        default_factory=ForecastConfig,
        description="What the run computes: the protocol and every choice that changes its "
        "numbers (recorded in the runs table).")
    warehouse: WarehousePath = Field(
        default_factory=default_warehouse, json_schema_extra={"default": None},
        description=f"DuckDB warehouse file; it must exist (default: ${WAREHOUSE_ENV} where the "
        "run starts -- a deployment's: the worker's -- else warehouse.duckdb in its working "
        "directory).")
    buildings: CommaList | None = Field(
        None, description="Building ids to forecast (default: every building in the warehouse)."
    )
    runner: RunnerKind = Field(
        "processes",
        description="Where tasks run: processes (default; tuning spends much of its time in "
        "Python, which threads share under one lock), threads, or dask.",
    )
    dask_address: str | None = Field(
        None, description="Dask scheduler address for runner dask (e.g. tcp://HOST:8786)."
    )
    workers: int | None = Field(None, ge=1, description="Parallel workers (default: cores).")
    batch_size: int | None = Field(
        None, ge=1, description="Buildings per task run (default: enough runs to give every "
        "worker four, at most 10 buildings each: few runs when models are cheap, so that "
        "reading and writing each batch costs little, and enough to spread the work).")
    max_in_flight: int = Field(8, ge=1, description="Task runs submitted at a time.")
    strict: bool = Field(
        False,
        description="End the run in error (exit code 3; a failed flow run under Prefect) when "
        "any building-week published a degraded forecast (persistence because no learned "
        "forecast could be trusted) or none, or failed, after everything is written: for "
        "schedulers that should alert.",
    )
    write_every_s: float | None = Field(
        None, ge=0,
        description="Longest time a finished batch waits before it is written (default: 10 "
        "seconds): the batches back by then are written together (a write's cost is mostly "
        "fixed), and what is left at the run's end or stop; 0 writes each batch as it comes "
        "back. A run ended by kill -9 loses at most this much finished work.",
    )
    lock_wait_minutes: float = Field(
        10.0, ge=0,
        description="How long a run waits for a warehouse that another process keeps locked: "
        "before it starts and at each read, and at its end, when results not written by then "
        "stay kept beside it (wadiro load-pending).",
    )

    @model_validator(mode="before")
    @classmethod
    def _gather_forecast_fields(cls, data: Any) -> Any:
        """The forecast's fields given beside the run's go into ``forecast``."""
        if not isinstance(data, Mapping):
            return data
        given = {k: v for k, v in data.items() if k in ForecastConfig.model_fields}
        if not given:
            return data
        forecast = data.get("forecast", {})
        if isinstance(forecast, ForecastConfig):
            forecast = forecast.model_dump(exclude_unset=True)
        if overlap := sorted(set(given) & set(forecast)):
            raise ValueError(f"{', '.join(overlap)} given both in forecast and beside it")
        rest = {k: v for k, v in data.items() if k not in given}
        return {**rest, "forecast": {**forecast, **given}}

    @model_serializer(mode="wrap")
    def _flat(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Written as one flat object, the forecast's fields first (a flow run's parameters,
        the deployments' defaults), as they may be given."""
        fields = serialize(self)
        return {**fields.pop("forecast", {}), **fields}

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The flat object's schema (a Prefect server checks a flow run's parameters by it):
        the forecast's fields beside the run's."""
        schema = handler(core_schema)
        own = handler.resolve_ref_schema(schema)
        forecast = handler.resolve_ref_schema(own["properties"].pop("forecast"))
        own["properties"] = {**forecast["properties"], **own["properties"]}
        return schema

    @field_validator("warehouse", mode="before")
    @classmethod
    def _warehouse_default(cls, value: str | None) -> str:
        """No warehouse given (left out, or ``null`` in a flow run's parameters):
        ``$WADIRO_WAREHOUSE`` where the settings are made (a scheduled run's: on the worker,
        when its flow run starts)."""
        return default_warehouse() if value is None else value

    @field_serializer("warehouse")
    def _warehouse_as_given(self, value: str) -> str | None:
        """A warehouse left to its default is written as ``null`` (the flows' parameter schema,
        a flow run's parameters), so that wherever the settings are read again the default is
        that place's ``$WADIRO_WAREHOUSE``, not the one of the process that wrote them."""
        return value if "warehouse" in self.model_fields_set else None

    def resolved(self) -> Self:
        """These settings, a warehouse left to its default taken from ``$WADIRO_WAREHOUSE``
        now: a flow's default settings are made when its module is imported, and a process that
        lives on (a test, a served flow) may set the variable later. A flow calls it first."""
        if "warehouse" in self.model_fields_set:
            return self
        return self.model_copy(update={"warehouse": default_warehouse()})

    @model_validator(mode="after")
    def _dask_needs_an_address(self) -> RunSettings:
        if self.runner == "dask" and not self.dask_address:
            raise ValueError("the dask runner needs dask_address (e.g. tcp://127.0.0.1:8786)")
        if self.buildings is not None and not self.buildings:
            raise ValueError("an empty list of buildings was given; leave it out for all")
        return self

    def batch_size_for(self, buildings: int) -> int:
        """:attr:`batch_size`, or the default for a run of ``buildings`` buildings."""
        if self.batch_size is not None:
            return self.batch_size
        workers = self.workers or os.cpu_count() or 1
        return max(1, min(MAX_AUTO_BATCH, math.ceil(buildings / (4 * workers))))

    def record(self, weeks: list, label: str) -> dict:
        """The ``runs.parameters`` record: the forecast's fields, then the run's but the
        warehouse path, the search spaces, the weeks and the flow (one flat object)."""
        forecast = self.forecast.as_record()
        search_spaces = forecast.pop("search_spaces")
        run = self.model_dump(mode="json", exclude={"forecast", "warehouse"})
        return {**forecast, **run, "search_spaces": search_spaces,
                "weeks": [w.isoformat() for w in weeks], "flow": label}


class WeeklySettings(RunSettings):
    """The weekly run's settings (the flow's parameter type)."""


class BackfillSettings(RunSettings):
    """A backfill's settings (the flow's parameter type)."""



"""Command-line options made from a settings model, so every option is defined once.

Each field of the settings model becomes an option ``--field-name`` with the field's default
and description (a field without a default is a required option); lists are given
comma-separated and dates as ``YYYY-MM-DD``. A field holding a mapping (per-model solver
options) is not an option: set it through a flow parameter or a deployment. The values are
validated by the model itself; a bad one is a usage error naming the option.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Literal, Optional, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

F = TypeVar("F", bound=Callable[..., Any])
DATE_FORMATS = ["%Y-%m-%d"]


def split_list(value: str | None, what: str) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]``; ``None`` -> ``None``; an empty list is a usage error."""
    if value is None:
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise typer.BadParameter(f"{what} is empty; leave the option out to select all")
    return items


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _without_none(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> ``(X, True)``; anything else -> ``(annotation, False)``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, tuple)


def _option(name: str, field: FieldInfo) -> inspect.Parameter | None:
    """The command parameter of one settings field (``None`` for a mapping)."""
    annotation, _ = _without_none(field.annotation)
    origin = typing.get_origin(annotation)
    help_text = field.description or ""
    required = field.is_required()
    default = inspect.Parameter.empty if required else field.default
    if origin in (dict, typing.Mapping) or annotation is dict:
        return None
    if _is_list(annotation):
        option = typer.Option(_flag(name), help=f"{help_text} Comma-separated.")
        return _parameter(name, Annotated[Optional[str], option], None)
    if origin is Literal:  # as an Enum, which every Typer release turns into a choice
        choices = enum.Enum(name, {str(c): str(c) for c in typing.get_args(annotation)},
                            type=str)
        option = typer.Option(_flag(name), help=help_text)
        return _parameter(name, Annotated[choices, option],
                          default if required else choices(field.default))
    if annotation is bool:
        option = typer.Option(f"{_flag(name)}/--no-{name.replace('_', '-')}", help=help_text)
        return _parameter(name, Annotated[bool, option], default)
    if annotation is date:  # Typer parses datetimes; the value is turned back into a date
        option = typer.Option(_flag(name), help=help_text, formats=DATE_FORMATS)
        return _parameter(name, Annotated[_optional(datetime, required), option], default)
    option = typer.Option(_flag(name), help=help_text)
    return _parameter(name, Annotated[_optional(annotation, required), option], default)


def _optional(annotation: Any, required: bool) -> Any:
    return annotation if required else Optional[annotation]


def _parameter(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


def _settings_values(settings: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for name, value in given.items():
        annotation, _ = _without_none(settings.model_fields[name].annotation)
        if _is_list(annotation):
            value = split_list(value, _flag(name))
            if value is None:
                continue  # the model's default (all)
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, datetime) and annotation is date:
            value = value.date()
        values[name] = value
    return values


def settings_problems(error: ValidationError) -> str:
    """One clause per bad field: ``--field: what is wrong``."""
    clauses = []
    for problem in error.errors():
        where = _flag(str(problem["loc"][0])) if problem["loc"] else "settings"
        clauses.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}")
    return "; ".join(clauses)


def with_settings(settings: type[BaseModel]) -> Callable[[F], F]:
    """Give a command one option per field of ``settings``; the command receives the validated
    model as its ``settings`` argument."""

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        generated = [p for name, field in settings.model_fields.items()
                     if (p := _option(name, field)) is not None]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            given = {p.name: kwargs.pop(p.name) for p in generated}
            try:
                value = settings(**_settings_values(settings, given))
            except ValidationError as error:
                raise typer.BadParameter(settings_problems(error)) from None
            return command(settings=value, **kwargs)

        parameters = own + generated
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper  # type: ignore[return-value]

    return decorate


__all__ = ["DATE_FORMATS", "settings_problems", "split_list", "with_settings"]

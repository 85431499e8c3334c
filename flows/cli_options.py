"""Command-line options made from a settings model, so every option is defined once.

Each field of the settings model becomes an option ``--field-name`` with the field's default
and description (a field without a default is a required option); lists are given
comma-separated, a mapping of names to numbers as ``NAME=VALUE`` pairs, and dates as
``YYYY-MM-DD``. A field holding a deeper mapping (per-model solver options) is not an option:
set it through a flow parameter or a deployment. The values are
validated by the model itself; a bad one is a usage error naming the option. A field whose
default comes from another field's choice (the model's ``PROTOCOL_DEFAULTS``, set by
``--protocol``) has no default of its own on the command line: left out, the model fills it in.

A command starts in about a second because nothing is imported before it is needed: a
settings model may be named by its import path (``"package.module:Class"``) and is imported
only when its command's options are built, and :class:`OnDemandCommands` builds a command's
options only when that command runs (or when a help page lists it).
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import types
import typing
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Literal, TypeVar

import click
import typer
import typer.main
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from typer.core import TyperGroup

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


def _without_none(annotation: Any) -> Any:
    """``X | None`` -> ``X``. A pydantic type (``Annotated[str, validator]``) is its plain type:
    the model validates the value."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _without_none(args[0])
    if typing.get_origin(annotation) is Annotated:
        return typing.get_args(annotation)[0]
    return annotation


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, tuple)


def _is_pairs(annotation: Any) -> bool:
    """A mapping of names to numbers, given as ``NAME=VALUE,...`` (the model parses them)."""
    return (typing.get_origin(annotation) in (dict, typing.Mapping)
            and typing.get_args(annotation)[1:] in ((float,), (int,)))


def _option(name: str, field: FieldInfo, preset: bool = False) -> inspect.Parameter | None:
    """The command parameter of one settings field (``None`` for a mapping). A ``preset``
    field's option defaults to ``None``, meaning "as the model's own default says"."""
    annotation = _without_none(field.annotation)
    required = field.is_required()
    help_text = (field.description or "") + (" (default: set by --protocol)" if preset else "")
    default = None if preset else inspect.Parameter.empty if required else field.default
    flag, formats = _flag(name), {}
    if _is_pairs(annotation) or _is_list(annotation):  # one string, split by _settings_values
        help_text += " Comma-separated" + (" NAME=VALUE." if _is_pairs(annotation) else ".")
        annotation, default, required = str, None, False
    elif typing.get_origin(annotation) in (dict, typing.Mapping) or annotation is dict:
        return None
    elif typing.get_origin(annotation) is Literal:  # an Enum: every Typer makes it a choice
        annotation = enum.Enum(name, {str(c): str(c) for c in typing.get_args(annotation)},
                               type=str)
        default = default if preset or required else annotation(default)
    elif annotation is bool:
        flag += f"/--no-{name.replace('_', '-')}"
    elif annotation is date:  # Typer parses datetimes; the value is turned back into a date
        annotation, formats = datetime, {"formats": DATE_FORMATS}
    option = typer.Option(flag, help=help_text, **formats)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default,
        annotation=Annotated[annotation if required else annotation | None, option])


def _option_fields(settings: type[BaseModel]) -> dict[str, tuple[FieldInfo, bool]]:
    """Every field that is an option, with whether its default is set by the protocol: the
    settings' own, and in their place those of a settings model they hold (a run's forecast),
    which the settings gather from beside their own."""
    fields = {}
    for name, field in settings.model_fields.items():
        held = _without_none(field.annotation)
        if isinstance(held, type) and issubclass(held, BaseModel):
            fields.update(_option_fields(held))
            continue
        fields[name] = (field, name in getattr(settings, "PROTOCOL_DEFAULTS", ()))
    return fields


def _settings_values(settings: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    values = {}
    fields = _option_fields(settings)
    for name, value in given.items():
        field, preset = fields[name]
        if preset and value is None:
            continue  # left to the protocol's value
        annotation = _without_none(field.annotation)
        if _is_list(annotation) or _is_pairs(annotation):
            value = split_list(value, _flag(name))
            if value is None:
                continue  # the model's default (all)
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, datetime) and annotation is date:
            value = value.date()
        values[name] = value
    return values


def settings_problems(error: ValidationError, settings: type[BaseModel] | None = None) -> str:
    """One clause per bad field: ``--field: what is wrong`` (a field of a model the
    ``settings`` hold named by its own option)."""
    held = set(settings.model_fields) - set(_option_fields(settings)) if settings else set()
    clauses = []
    for problem in error.errors():
        loc = [part for part in problem["loc"] if part not in held]
        where = _flag(str(loc[0])) if loc else "settings"
        clauses.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}")
    return "; ".join(clauses)


def _resolve(settings: type[BaseModel] | str) -> type[BaseModel]:
    if not isinstance(settings, str):
        return settings
    module, _, name = settings.partition(":")
    return getattr(importlib.import_module(module), name)


class _SettingsCommand:
    """A command taking ``settings``, seen by Typer as one taking an option per field.

    The settings model is imported, and the options made from it, the first time Typer asks
    for the command's signature (building that one command).
    """

    def __init__(self, command: Callable[..., Any], settings: type[BaseModel] | str) -> None:
        functools.update_wrapper(self, command,
                                 assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        self._command = command
        self._settings_ref = settings

    @functools.cached_property
    def _parts(self) -> tuple[type[BaseModel], inspect.Signature, list[inspect.Parameter]]:
        settings = _resolve(self._settings_ref)
        signature = inspect.signature(self._command)  # `settings` may name an unimported class
        scope = getattr(self._command, "__globals__", {})
        own = [p.replace(annotation=eval(p.annotation, scope))  # noqa: S307 -- as eval_str does
               if isinstance(p.annotation, str) else p
               for p in signature.parameters.values() if p.name != "settings"]
        generated = [p for name, (field, preset) in _option_fields(settings).items()
                     if (p := _option(name, field, preset)) is not None]
        return settings, signature.replace(parameters=own + generated), generated

    @property
    def __signature__(self) -> inspect.Signature:  # what inspect.signature() returns
        return self._parts[1]

    @property
    def __annotations__(self) -> dict[str, Any]:  # what typing.get_type_hints() reads
        return {p.name: p.annotation for p in self._parts[1].parameters.values()}

    def __call__(self, **kwargs: Any) -> Any:
        settings, _, generated = self._parts
        given = {p.name: kwargs.pop(p.name) for p in generated}
        try:
            value = settings(**_settings_values(settings, given))
        except ValidationError as error:
            raise typer.BadParameter(settings_problems(error, settings)) from None
        return self._command(settings=value, **kwargs)


def with_settings(settings: type[BaseModel] | str) -> Callable[[F], F]:
    """Give a command one option per field of ``settings`` (a model, or its import path
    ``"package.module:Class"``, imported when the command is built); the command receives the
    validated model as its ``settings`` argument."""

    def decorate(command: F) -> F:
        return _SettingsCommand(command, settings)  # type: ignore[return-value]

    return decorate


class OnDemandCommands:
    """Commands registered like Typer's, but turned into Click commands one at a time, when
    they run or a help page lists them, so that running one imports nothing the others need.

    Register with :meth:`command`; give :meth:`group_class` as the ``cls`` of the Typer app
    (or sub-app) they belong to.
    """

    def __init__(self) -> None:
        self.registry = typer.Typer()  # never turned into a Click group as a whole

    def command(self, name: str, **options: Any) -> Callable[[F], F]:
        return self.registry.command(name, **options)

    def group_class(self) -> type[TyperGroup]:
        registry = self.registry

        class OnDemandGroup(TyperGroup):
            def list_commands(self, ctx: click.Context) -> list[str]:
                names = [info.name for info in registry.registered_commands if info.name]
                return [*super().list_commands(ctx), *names]

            def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
                if (known := super().get_command(ctx, cmd_name)) is not None:
                    return known
                for info in registry.registered_commands:
                    if info.name == cmd_name:
                        command = typer.main.get_command_from_info(
                            info, pretty_exceptions_short=registry.pretty_exceptions_short,
                            rich_markup_mode=registry.rich_markup_mode)
                        self.commands[cmd_name] = command
                        return command
                return None

        return OnDemandGroup


__all__ = ["DATE_FORMATS", "OnDemandCommands", "settings_problems", "split_list", "with_settings"]

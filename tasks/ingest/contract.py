"""What an operator's file must hold, declared once per kind of file, and judged in one place.

A reader declares its file's :class:`FileContract`: each :class:`Column` -- its name, whether the
header must have it, what its cells are (``id``, ``text``, ``number`` or ``time``), whether every
cell must hold a value, a number's plausible range (:class:`~.plausibility.Bound`), an id's
name in messages and whether it is typed into a comma-separated option -- and the columns no two
rows may share (``key``), or what every other column is (``others``: a wide file's column per
building, named by its id). The contract reads the file (:meth:`FileContract.read`, or
:meth:`FileContract.open` for a file read in chunks), checks the header against the columns
(the column mapping's targets too), and :meth:`FileContract.judge` turns the cells into values,
refusing the first bad one naming its line and column. What is a reader's own stays with it:
timestamps (their clock and layout options), time zones and calendars, the time grid.

>>> from tasks.ingest.plausibility import TEMPERATURE_C
>>> contract = FileContract("a thermometer file", (
...     Column("site_id", "id", what="site id"), Column("ts", "time"),
...     Column("temperature_c", "number", filled=False, bound=TEMPERATURE_C)))
>>> contract.required, contract.optional
(('site_id', 'ts', 'temperature_c'), ())
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tasks.ingest.column_mapping import ColumnMapping
from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.identifiers import (
    check_id_names,
    unprintable_at,
    unprintable_problem,
)
from tasks.ingest.plausibility import Bound, ImplausiblePolicy, Tally, check_column
from tasks.ingest.source_files import (
    CsvFormat,
    FileOptions,
    SourceRows,
    SourceStream,
    SourceTable,
    check_columns,
    open_source,
)

__all__ = ["CellKind", "Cells", "Column", "FileContract", "checked_ids"]

CellKind = Literal["id", "text", "number", "time"]


@dataclass(frozen=True)
class Column:
    """One column of a file: how its cells are read and what they must be."""

    name: str
    cells: CellKind = "text"
    """``id``: printable text (:mod:`~tasks.ingest.identifiers`); ``text``;
    ``number``: float64, checked against ``bound``; ``time``: read by the reader's own clock
    options (:mod:`~tasks.ingest.timestamps`), not judged here."""
    required: bool = True
    """Whether the header must have the column (else it is optional)."""
    filled: bool = True
    """Whether every cell must hold a value (else a blank cell is a missing value)."""
    what: str = ""
    """An id's name in messages (``building id``)."""
    listed: str = ""
    """The comma-separated option an id is typed into (``--buildings``): it may hold no comma."""
    bound: Bound | None = None
    """A number's plausible values."""
    aliases: tuple[str, ...] = ()
    """Other names the file may give the column (exactly one of them, or the name, is there)."""

    def checked_numbers(self, values: pa.Array, at: SourceRows, *, policy: ImplausiblePolicy,
                        tally: Tally, scale: float = 1.0, column: str | None = None) -> pa.Array:
        """``values`` (a chunk's or the file's numbers, as read) checked against ``bound``
        (compared after ``scale``), an implausible one refused or made missing by ``policy``
        and counted in ``tally``; ``column`` names the file's column (default: this one)."""
        if self.bound is None:
            return values
        return tally.take(check_column(
            values, self.bound, path=at.path, column=column or self.name,
            lines=at.lines(np.arange(len(values))), policy=policy, scale=scale,
            label=at.row_label))


@dataclass(frozen=True)
class Cells:
    """A file's judged values by column (an optional column the file lacks: all missing), the
    blank cells of each number column as read, and the values :attr:`tally` changed."""

    values: dict[str, pa.Array]
    rows: int
    blank: dict[str, int] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)

    def __getitem__(self, name: str) -> pa.Array:
        return self.values[name]

    def strings(self, name: str) -> pd.Series:
        """A text or id column as a Series of ``str`` (missing: ``None``)."""
        return pd.Series(self.values[name].to_pylist(), dtype=object)


def checked_ids(at: SourceRows, column: Column, trimmed: pa.Array | pa.ChunkedArray
                ) -> pa.DictionaryArray:
    """An id column's trimmed cells, dictionary-encoded (each distinct id checked once),
    refusing a blank cell, an id that is not printable text, or, for an id typed into a comma
    list, one holding a comma; errors name the first such row."""
    if column.filled:
        at.refuse_blank(column.name, trimmed)
    encoded = pc.dictionary_encode(trimmed)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    ids, indices = encoded.dictionary, encoded.indices

    def first_row(index: int) -> int:
        return int(np.flatnonzero(indices.to_numpy(zero_copy_only=False) == index)[0])

    bad = unprintable_at(ids)
    if bad is not None:
        raise at.error(first_row(bad), column.name,
                       unprintable_problem(ids[bad].as_py(), column.what or column.name))
    if column.listed:
        commas = pc.match_substring(ids, ",").to_numpy(zero_copy_only=False)
        if commas.any():
            bad = int(commas.argmax())
            raise at.error(
                first_row(bad), column.name,
                f"{column.what or column.name} {ids[bad].as_py()!r} holds a comma, which "
                f"separates ids in {column.listed} (it could never be selected); rename it, "
                "e.g. with '-' or '_'")
    return encoded


@dataclass(frozen=True)
class FileContract:
    """The columns of a kind of file (``what``, e.g. ``a buildings file``) and the ``key`` no
    two rows share; ``repeated`` says a repeated key (``building {building_id!r} is listed
    twice``), the two rows' lines added."""

    what: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    repeated: str = ""
    others: Column | None = None
    """What every column the contract does not name is: one per id, the id its name (a wide
    readings file's buildings); ``None``: no other column is allowed."""

    def __post_init__(self) -> None:
        judged = {c.name for c in self.columns if c.cells in ("id", "text")}
        if not set(self.key) <= judged:
            raise ValueError(f"{self.what}: a key is made of id or text columns (a time "
                             "series' instants are checked by its reader)")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.required and not c.aliases)

    @property
    def optional(self) -> tuple[str, ...]:
        return tuple(name for c in self.columns if not c.required or c.aliases
                     for name in (c.name, *c.aliases))

    def other_columns(self, columns: list[str]) -> list[str]:
        """The columns of a file (its header, as mapped) that the contract does not name."""
        return [name for name in columns if name not in self.allowed]

    def column(self, name: str) -> Column:
        return next(column for column in self.columns if column.name == name)

    def requiring(self, *names: str) -> FileContract:
        """This contract with the columns ``names`` required."""
        return replace(self, columns=tuple(replace(c, required=True) if c.name in names else c
                                           for c in self.columns))

    def open(self, path: str | Path, form: CsvFormat | None = None) -> SourceStream:
        """``path`` opened to be read in chunks, its header checked against the columns (read
        through ``form``'s column mapping when it is a :class:`FileOptions`)."""
        mapping = form.column_mapping() if isinstance(form, FileOptions) else None
        self._check_targets(Path(path), mapping)  # before the file is opened
        stream = open_source(path, optional=None, form=form, mapping=mapping)
        try:
            self._check_columns(stream.at.path, stream.columns, mapping)
        except MalformedSourceError:
            stream.close()
            raise
        return stream

    def read(self, path: str | Path, form: CsvFormat | None = None) -> SourceTable:
        """The whole of ``path``, its header checked (:meth:`open`); a file without data rows
        is refused."""
        return self.open(path, form).whole()

    def check_header(self, path: Path, columns: list[str], mapping: ColumnMapping | None
                     ) -> None:
        """The header of a file already open (``columns``, named as the mapping reads them)
        against the contract: for a reader that tells which contract a file follows from its
        header (a long or a wide readings file)."""
        self._check_targets(path, mapping)
        self._check_columns(path, columns, mapping)

    def _check_targets(self, path: Path, mapping: ColumnMapping | None) -> None:
        """The mapping names only the contract's columns (any, for a file of :attr:`others`)."""
        if mapping and self.others is None:
            mapping.check_targets(path, self.allowed, self.what)

    def _check_columns(self, path: Path, columns: list[str], mapping: ColumnMapping | None
                       ) -> None:
        check_columns(path, columns, self.required,
                      self.optional if self.others is None else None, mapping)
        self._check_aliases(path, columns)
        self._check_others(path, columns)

    @property
    def allowed(self) -> tuple[str, ...]:
        return (*self.required, *self.optional)

    def value_column(self, name: str, columns: list[str]) -> str | None:
        """The file's name of the column ``name``: itself or the one of its aliases present
        (``None``: neither)."""
        column = self.column(name)
        return next((n for n in (name, *column.aliases) if n in columns), None)

    def _check_others(self, path: Path, columns: list[str]) -> None:
        """A contract with :attr:`others`: at least one such column, each named by a printable
        id."""
        if self.others is None:
            return
        others = self.other_columns(columns)
        if not others:
            raise MalformedSourceError(
                f"{path}: {self.what} needs {', '.join(self.required)} and one column per "
                f"{self.others.what}; found only {columns}")
        check_id_names(path, columns, self.others.what)

    def _check_aliases(self, path: Path, columns: list[str]) -> None:
        for column in self.columns:
            if not column.aliases:
                continue
            present = [n for n in (column.name, *column.aliases) if n in columns]
            if len(present) != 1 and (column.required or present):
                names = " or ".join(map(repr, (column.name, *column.aliases)))
                raise MalformedSourceError(
                    f"{path}: {self.what} needs exactly one {column.name} column, {names}; "
                    f"found {columns}")

    def judge(self, source: SourceTable, *, policy: ImplausiblePolicy = "refuse",
              scale: Mapping[str, float] | None = None) -> Cells:
        """Every id, text and number column of ``source`` as values, checked, then the key;
        the first bad cell is refused naming its line and column (an implausible number is
        made missing instead under ``policy="missing"``, and counted). ``scale`` multiplies a
        number column's cells into the column's unit before they are checked (a feed's wind
        in knots)."""
        values: dict[str, pa.Array] = {}
        blank: dict[str, int] = {}
        tally = Tally()
        at, n = source.at, source.rows
        for column in self.columns:
            if column.cells == "time":
                continue
            name = self.value_column(column.name, source.columns)
            if name is None:
                values[column.name] = pa.nulls(n, pa.float64() if column.cells == "number"
                                               else pa.string())
                continue
            if column.cells == "number":
                numbers = source.numbers(name)
                if scale and column.name in scale:
                    numbers = pc.multiply(numbers, pa.scalar(scale[column.name], pa.float64()))
                blank[column.name] = numbers.null_count
                if column.filled:
                    at.refuse_blank(name, numbers)
                values[column.name] = column.checked_numbers(numbers, at, policy=policy,
                                                             tally=tally, column=name)
                continue
            trimmed = source.trimmed(name).combine_chunks()
            if column.cells == "id":
                trimmed = checked_ids(at, column, trimmed).dictionary_decode()
            elif column.filled:
                at.refuse_blank(name, trimmed)
            values[column.name] = trimmed.cast(pa.string())
        self._check_key(at, values)
        return Cells(values, n, blank, tally)

    def _check_key(self, at: SourceRows, values: Mapping[str, pa.Array]) -> None:
        if not self.key:
            return
        keys = pd.DataFrame({name: values[name].to_pandas() for name in self.key})
        repeated = keys.duplicated().to_numpy()
        if not repeated.any():
            return
        second = int(repeated.argmax())
        row = keys.iloc[second]
        first = int((keys == row).all(axis=1).to_numpy().argmax())
        said = self.repeated.format(**row.to_dict())
        raise at.error(second, self.key[-1],
                       f"{said} ({at.where(first)} and {at.where(second)})")

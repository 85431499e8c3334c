"""An operator's file (CSV or Parquet, by extension) as raw columns, and where each row is in it.

Only reading and the checks every file kind shares live here: the file exists and is not
empty, no column name appears twice, the required columns are there and no unexpected one is.
Cells are read as text from a CSV (an empty cell is missing; surrounding spaces are trimmed) and
as stored from a Parquet file. A CSV is comma-separated UTF-8 with decimal points unless a
:class:`CsvFormat` says otherwise (``--delimiter``, ``--decimal``, ``--encoding``); a file
written otherwise (European Excel's ``;`` and decimal commas, Latin-1 text) is refused naming
the line and the option that reads it. :meth:`SourceTable.numbers` and
:meth:`SourceTable.text` turn a column into values, refusing a cell that is not one with an
error naming file, row and column.
Rows are named as a reader finds them: ``line N`` of a CSV (the header is line 1), ``row N``
(1-based) of a Parquet file.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from wadiro_fleet.tasks.ingest.errors import MalformedSourceError, SourceNotFoundError

__all__ = ["FORMATS", "CsvFormat", "SourceTable", "read_source"]

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""File extensions read, and as what."""

_NAN_WORDS = {"nan", "+nan", "-nan"}
_DELIMITERS = {",": ",", ";": ";", "|": "|", "\t": "\t", "tab": "\t"}
_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")


class CsvFormat(BaseModel):
    """How a CSV file is written (the options of the commands that read one; a Parquet file
    carries its own types and ignores them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delimiter: str = Field(
        ",", description="The character between a CSV's cells: , (default), ; (as European "
        "Excel saves CSV), | or tab.")
    decimal: str = Field(
        ".", description="The decimal mark of a CSV's numbers: . (default) or , (1,5 is 1.5; "
        "then the delimiter cannot be a comma).")
    encoding: str = Field(
        "utf-8", description="The CSV's text encoding: utf-8 (default), or e.g. latin-1, cp1252.")

    @field_validator("delimiter")
    @classmethod
    def _known_delimiter(cls, value: str) -> str:
        if value not in _DELIMITERS:
            raise ValueError(f"{value!r} is not a delimiter this reads; one of , ; | tab")
        return _DELIMITERS[value]

    @field_validator("decimal")
    @classmethod
    def _known_decimal(cls, value: str) -> str:
        if value not in (".", ","):
            raise ValueError(f"{value!r} is not a decimal mark; . or ,")
        return value

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown text encoding {value!r} (e.g. utf-8, latin-1, "
                             "cp1252)") from None
        return value

    @model_validator(mode="after")
    def _decimal_is_not_the_delimiter(self) -> CsvFormat:
        if self.decimal == self.delimiter:
            raise ValueError("a decimal comma needs another delimiter (--delimiter ';')")
        return self


@dataclass(frozen=True)
class SourceTable:
    """A file's columns as read (``table``), with the file's path and kind."""

    path: Path
    kind: str
    table: pa.Table
    decimal: str = "."

    @property
    def rows(self) -> int:
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def where(self, row: int) -> str:
        """``line N`` (CSV, header = line 1) or ``row N`` (Parquet) of the 0-based ``row``."""
        return f"line {row + 2}" if self.kind == "csv" else f"row {row + 1}"

    def row_numbers(self) -> np.ndarray:
        """What :meth:`where` prints for every row, as numbers (lines or 1-based rows)."""
        return np.arange(self.rows) + (2 if self.kind == "csv" else 1)

    @property
    def row_label(self) -> str:
        return "line" if self.kind == "csv" else "row"

    def error(self, row: int, column: str, message: str) -> MalformedSourceError:
        """An error naming the file, ``row`` (0-based) and ``column``."""
        return MalformedSourceError(f"{self.path}: {self.where(row)}, column {column!r}: {message}")

    def text(self, column: str, *, required: bool) -> pd.Series:
        """The column as trimmed strings (missing: ``None``); with ``required`` a missing cell
        is an error naming its row."""
        values = self.table[column]
        if not (
            pa.types.is_string(values.type)
            or pa.types.is_large_string(values.type)
            or pa.types.is_null(values.type)
        ):
            values = pc.cast(values, pa.string())
        trimmed = pc.utf8_trim_whitespace(values)
        trimmed = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, trimmed.type), trimmed)
        series = pd.Series(trimmed.to_numpy(zero_copy_only=False), dtype=object)
        if required and series.isna().any():
            row = int(np.flatnonzero(series.isna().to_numpy())[0])
            raise self.error(row, column, "empty cell; a value is required")
        return series

    def numbers(self, column: str) -> pa.Array:
        """The column as float64: a blank cell is missing (null); ``nan`` or ``inf`` written in
        a cell stay values (the plausibility check refuses them); anything else that is not a
        number is an error naming its row."""
        values = self.table[column]
        kind = values.type
        if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind):
            return pc.cast(values, pa.float64()).combine_chunks()
        if pa.types.is_null(kind):
            return pa.nulls(self.rows, pa.float64())
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise MalformedSourceError(f"{self.path}: column {column!r} holds {kind}, not numbers")
        text = self.text(column, required=False)
        written = text.str.replace(",", ".", regex=False) if self.decimal == "," else text
        numbers = pd.to_numeric(written, errors="coerce")
        written_nan = text.str.lower().isin(_NAN_WORDS)
        bad = (numbers.isna() & text.notna() & ~written_nan).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            hint = ("; give --decimal ',' if the file writes decimals with a comma"
                    if self.decimal == "." and _DECIMAL_COMMA.match(text.iloc[row]) else "")
            raise self.error(row, column, f"{text.iloc[row]!r} is not a number{hint}")
        return pa.array(numbers.to_numpy(dtype=float), pa.float64(), mask=text.isna().to_numpy())


def _shown(delimiter: str) -> str:
    return "tab" if delimiter == "\t" else delimiter


def _undecodable_line(path: Path, encoding: str) -> MalformedSourceError | None:
    """An error naming the first line that is not ``encoding`` text, if any."""
    decoder = codecs.getincrementaldecoder(encoding)()
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                decoder.decode(line)
            except UnicodeDecodeError as error:
                byte = line[error.start]
                return MalformedSourceError(
                    f"{path}: line {number} is not {encoding} text (byte 0x{byte:02x} at "
                    f"character {error.start + 1}); save the file as UTF-8 (Excel: 'CSV UTF-8'), "
                    "or give --encoding with the encoding it was saved in "
                    "(e.g. --encoding latin-1)")
    return None


def _csv_header(path: Path, form: CsvFormat) -> list[str]:
    encoding = "utf-8-sig" if codecs.lookup(form.encoding).name == "utf-8" else form.encoding
    with path.open(newline="", encoding=encoding) as handle:
        try:
            return [name.strip() for name in next(csv.reader(handle, delimiter=form.delimiter))]
        except StopIteration:
            raise MalformedSourceError(f"{path}: empty file, no header and no rows") from None
        except UnicodeDecodeError:
            raise _undecodable_line(path, form.encoding) from None
        except csv.Error as error:
            raise MalformedSourceError(f"{path}: not a readable CSV file ({error})") from None


def _other_delimiter(path: Path, names: list[str], form: CsvFormat) -> MalformedSourceError | None:
    """An error naming the delimiter a one-column header really uses, and the options that
    read the file (``;`` and decimal commas: a CSV as European Excel saves it)."""
    if len(names) != 1:
        return None
    used = next((d for d in (";", "\t", "|", ",") if d != form.delimiter and d in names[0]), None)
    if used is None:
        return None
    with path.open(newline="", encoding=form.encoding, errors="replace") as handle:
        rows = csv.reader(handle, delimiter=used)
        next(rows, None)
        second = next(rows, [])
    decimal = (" and --decimal ','" if used != "," and form.decimal == "."
               and any(_DECIMAL_COMMA.match(cell.strip()) for cell in second) else "")
    return MalformedSourceError(
        f"{path}: the header is one column, {names[0]!r}: the file's cells are separated by "
        f"{_shown(used)!r}, not {_shown(form.delimiter)!r}; give --delimiter "
        f"'{_shown(used)}'{decimal}, or save it as a comma-separated CSV")


def _read_csv(path: Path, form: CsvFormat) -> pa.Table:
    names = _csv_header(path, form)
    problem = _other_delimiter(path, names, form)
    if problem is not None:
        raise problem
    _check_unique(path, names)
    try:
        return pcsv.read_csv(
            str(path),
            read_options=pcsv.ReadOptions(column_names=names, skip_rows=1, encoding=form.encoding),
            parse_options=pcsv.ParseOptions(delimiter=form.delimiter),
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as error:
        undecodable = _undecodable_line(path, form.encoding)
        if undecodable is not None:
            raise undecodable from None
        ragged = _ragged_line(path, len(names), form)
        if ragged is not None:
            line, cells = ragged
            raise MalformedSourceError(
                f"{path}: line {line}: {cells} cell(s), but the header has {len(names)} columns "
                f"(cells separated by {_shown(form.delimiter)!r}; --delimiter names another)"
            ) from None
        reason = " ".join(str(error).split())
        raise MalformedSourceError(f"{path}: not a readable CSV file ({reason})") from None


def _ragged_line(path: Path, width: int, form: CsvFormat) -> tuple[int, int] | None:
    """The first line whose number of cells differs from the header's, if any."""
    with path.open(newline="", encoding=form.encoding, errors="replace") as handle:
        reader = csv.reader(handle, delimiter=form.delimiter)
        next(reader, None)
        for cells in reader:
            if len(cells) != width:
                return reader.line_num, len(cells)
    return None


def _read_parquet(path: Path) -> pa.Table:
    try:
        parquet = pq.ParquetFile(str(path))
        _check_unique(path, parquet.schema_arrow.names)
        return parquet.read()
    except (pa.ArrowInvalid, OSError) as error:
        reason = " ".join(str(error).split())
        raise MalformedSourceError(f"{path}: not a readable Parquet file ({reason})") from None


def _check_unique(path: Path, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for position, name in enumerate(names, start=1):
        if name == "":
            raise MalformedSourceError(f"{path}: column {position} of the header has no name")
        if name in seen:
            raise MalformedSourceError(
                f"{path}: column {name!r} appears more than once in the header (column {position})"
            )
        seen.add(name)


def read_source(
    path: str | Path, *, required: Iterable[str] = (), optional: Iterable[str] | None = (),
    form: CsvFormat | None = None,
) -> SourceTable:
    """Read ``path`` (``.csv`` or ``.parquet``; a CSV as ``form`` says) and check its columns.

    Every name in ``required`` must be a column; with ``optional`` a collection, every other
    column must be in it (``None``: any other column is allowed, e.g. a wide file's ids). A
    file without data rows is refused.
    """
    path = Path(path)
    form = form or CsvFormat()
    if path.is_dir():
        raise MalformedSourceError(
            f"{path} is a folder, not a file; give the path of one .csv or .parquet file")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise MalformedSourceError(
            f"{path}: unknown file kind {path.suffix!r}; give a .csv or .parquet file"
        )
    if not path.exists():
        raise SourceNotFoundError(f"file does not exist: {path}")
    if not path.is_file():
        raise MalformedSourceError(f"{path} is not a regular file; give a .csv or .parquet file")
    if path.stat().st_size == 0:
        raise MalformedSourceError(f"{path}: empty file, no header and no rows")
    try:
        table = _read_csv(path, form) if kind == "csv" else _read_parquet(path)
    except OSError as error:  # a file that cannot be opened (permissions, a device, ...)
        raise MalformedSourceError(f"{path}: cannot be read ({error.strerror or error})") from None
    source = SourceTable(path, kind, table, form.decimal if kind == "csv" else ".")
    required = list(required)
    missing = [name for name in required if name not in source.columns]
    if missing:
        raise MalformedSourceError(
            f"{path}: missing required column(s) {', '.join(map(repr, missing))}; "
            f"found {source.columns}"
        )
    if optional is not None:
        allowed = set(required) | set(optional)
        unexpected = [name for name in source.columns if name not in allowed]
        if unexpected:
            raise MalformedSourceError(
                f"{path}: unexpected column(s) {', '.join(map(repr, unexpected))}; the columns "
                f"are {', '.join(required)}"
                + (f" and optionally {', '.join(sorted(set(optional)))}" if optional else "")
            )
    if source.rows == 0:
        raise MalformedSourceError(f"{path}: empty file, a header but no data rows")
    return source

"""An operator's file (CSV or Parquet, by extension) as raw columns, and where each row is in it.

Only reading and the checks every file kind shares live here: the file exists and is not
empty, no column name appears twice, the required columns are there and no unexpected one is.
Cells are read as text from a CSV (an empty cell is missing; surrounding spaces are trimmed) and
as stored from a Parquet file; :meth:`SourceTable.numbers` and :meth:`SourceTable.text` turn a
column into values, refusing a cell that is not one with an error naming file, row and column.
Rows are named as a reader finds them: ``line N`` of a CSV (the header is line 1), ``row N``
(1-based) of a Parquet file.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from wadiro_fleet.tasks.ingest.errors import MalformedSourceError, SourceNotFoundError

__all__ = ["FORMATS", "SourceTable", "read_source"]

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""File extensions read, and as what."""

_NAN_WORDS = {"nan", "+nan", "-nan"}


@dataclass(frozen=True)
class SourceTable:
    """A file's columns as read (``table``), with the file's path and kind."""

    path: Path
    kind: str
    table: pa.Table

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
        numbers = pd.to_numeric(text, errors="coerce")
        written_nan = text.str.lower().isin(_NAN_WORDS)
        bad = (numbers.isna() & text.notna() & ~written_nan).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise self.error(row, column, f"{text.iloc[row]!r} is not a number")
        return pa.array(numbers.to_numpy(dtype=float), pa.float64(), mask=text.isna().to_numpy())


def _csv_header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        try:
            return [name.strip() for name in next(csv.reader(handle))]
        except StopIteration:
            raise MalformedSourceError(f"{path}: empty file, no header and no rows") from None
        except (UnicodeDecodeError, csv.Error) as error:
            raise MalformedSourceError(f"{path}: not a readable CSV file ({error})") from None


def _read_csv(path: Path) -> pa.Table:
    names = _csv_header(path)
    _check_unique(path, names)
    try:
        return pcsv.read_csv(
            str(path),
            read_options=pcsv.ReadOptions(column_names=names, skip_rows=1, encoding="utf-8"),
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as error:
        ragged = _ragged_line(path, len(names))
        if ragged is not None:
            line, cells = ragged
            raise MalformedSourceError(
                f"{path}: line {line}: {cells} cell(s), but the header has {len(names)} columns"
            ) from None
        reason = " ".join(str(error).split())
        raise MalformedSourceError(f"{path}: not a readable CSV file ({reason})") from None


def _ragged_line(path: Path, width: int) -> tuple[int, int] | None:
    """The first line whose number of cells differs from the header's, if any."""
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.reader(handle)
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
    path: str | Path, *, required: Iterable[str] = (), optional: Iterable[str] | None = ()
) -> SourceTable:
    """Read ``path`` (``.csv`` or ``.parquet``) and check its columns.

    Every name in ``required`` must be a column; with ``optional`` a collection, every other
    column must be in it (``None``: any other column is allowed, e.g. a wide file's ids). A
    file without data rows is refused.
    """
    path = Path(path)
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise MalformedSourceError(
            f"{path}: unknown file kind {path.suffix!r}; give a .csv or .parquet file"
        )
    if not path.is_file():
        raise SourceNotFoundError(f"file does not exist: {path}")
    if path.stat().st_size == 0:
        raise MalformedSourceError(f"{path}: empty file, no header and no rows")
    table = _read_csv(path) if kind == "csv" else _read_parquet(path)
    source = SourceTable(path, kind, table)
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

"""An operator's file (CSV or Parquet, by extension) as raw columns, and where each row is in it.

Only reading and the checks every file kind shares live here: the file exists and is not
empty, no column name appears twice, the required columns are there and no unexpected one is.
Cells are read as text from a CSV (an empty cell is missing; surrounding spaces are trimmed) and
as stored from a Parquet file. A CSV is comma-separated UTF-8 with decimal points unless a
:class:`CsvFormat` says otherwise (``--delimiter``, ``--decimal``, ``--encoding``); a file
written otherwise (European Excel's ``;`` and decimal commas, Latin-1 text) is refused naming
the line and the option that reads it. With ``--decimal ','`` a dot separates thousands
(``1.234,5`` is 1234.5, ``1.234`` is 1234; ``1.23`` is refused). The file's own column names
are read as the warehouse's through a column mapping (:class:`FileOptions`,
:mod:`~wadiro_fleet.tasks.ingest.column_mapping`).

:meth:`SourceTable.numbers` and :meth:`SourceTable.text` turn a column into values, refusing a
cell that is not one with an error naming file, row and column. A large file is read in chunks
(:func:`open_source`, :meth:`SourceStream.chunks`: a CSV block or a Parquet batch at a time), so
that only the columns a reader keeps, in their compact form, grow with the file.
Rows are named as a reader finds them: ``line N`` of a CSV (the header is line 1), ``row N``
(1-based) of a Parquet file, counted from the file's start in every chunk.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from wadiro_fleet.tasks.ingest.column_mapping import ColumnMapping, parse_pairs
from wadiro_fleet.tasks.ingest.errors import MalformedSourceError, SourceNotFoundError

__all__ = ["FORMATS", "CsvFormat", "FileOptions", "SourceRows", "SourceStream", "SourceTable",
           "open_source", "read_source"]

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""File extensions read, and as what."""

_NAN_WORDS = {"nan", "+nan", "-nan"}
_DELIMITERS = {",": ",", ";": ";", "|": "|", "\t": "\t", "tab": "\t"}
_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")
_COMMA_NUMBER = r"^[+-]?(?:\d{1,3}(?:\.\d{3})+|\d*)(?:,\d*)?(?:[eE][+-]?\d+)?$"
"""A number written with a decimal comma: a dot only between groups of three digits."""
CHUNK_BYTES = 16 << 20
"""How much of a CSV is read at a time (a block of pyarrow's streaming reader)."""
CHUNK_ROWS = 250_000
"""How many rows of a Parquet file are read at a time."""
_LEFT_OUT = "\x00left out {}"
"""The name a column left out by the mapping has while the reader skips it."""


class CsvFormat(BaseModel):
    """How a CSV file is written (the options of the commands that read one; a Parquet file
    carries its own types and ignores them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delimiter: str = Field(
        ",", description="The character between a CSV's cells: , (default), ; (as European "
        "Excel saves CSV), | or tab.")
    decimal: str = Field(
        ".", description="The decimal mark of a CSV's numbers: . (default) or , (1,5 is 1.5 "
        "and a dot separates thousands, 1.234,5 is 1234.5; then the delimiter cannot be a "
        "comma).")
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


class FileOptions(CsvFormat):
    """How an operator's file is read: a CSV's format, and which of the file's columns is which
    warehouse column (:mod:`~wadiro_fleet.tasks.ingest.column_mapping`)."""

    columns: tuple[str, ...] | None = Field(
        None, description="Read the file's column SOURCE as TARGET, as SOURCE=TARGET pairs "
        "(e.g. \"Asset Name=building_id,Site=site_id\"); SOURCE= with no target leaves a "
        "column out.")
    columns_file: str | None = Field(
        None, description="The column mapping in a file: a CSV with the header source,target "
        "or a JSON object {\"Asset Name\": \"building_id\"}; with --columns, both apply.")

    @field_validator("columns")
    @classmethod
    def _pairs(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else parse_pairs(value)

    def column_mapping(self) -> ColumnMapping:
        """The mapping the options give (the mapping file read now)."""
        return ColumnMapping.from_options(self.columns, self.columns_file)


@dataclass(frozen=True)
class SourceRows:
    """Where a file's rows are, to name them in errors: ``line N`` of a CSV (the header is
    line 1) or ``row N`` (1-based) of a Parquet file, for 0-based row indices of the file."""

    path: Path
    kind: str

    def _first(self) -> int:
        return 0

    def where(self, row: int) -> str:
        """``line N`` (CSV, header = line 1) or ``row N`` (Parquet) of the 0-based ``row``."""
        row += self._first()
        return f"line {row + 2}" if self.kind == "csv" else f"row {row + 1}"

    def lines(self, rows: np.ndarray) -> np.ndarray:
        """What :meth:`where` prints for each of ``rows``, as numbers."""
        return np.asarray(rows, dtype=np.int64) + self._first() + (2 if self.kind == "csv" else 1)

    @property
    def row_label(self) -> str:
        return "line" if self.kind == "csv" else "row"

    def error(self, row: int, column: str, message: str) -> MalformedSourceError:
        """An error naming the file, ``row`` (0-based) and ``column``."""
        return MalformedSourceError(f"{self.path}: {self.where(row)}, column {column!r}: {message}")


@dataclass(frozen=True)
class SourceTable(SourceRows):
    """A file's columns as read (``table``), with the file's path and kind; a chunk of a file
    starts at its row ``first_row``."""

    table: pa.Table
    decimal: str = "."
    first_row: int = field(default=0, kw_only=True)

    def _first(self) -> int:
        return self.first_row

    @property
    def rows(self) -> int:
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def row_numbers(self) -> np.ndarray:
        """What :meth:`where` prints for every row, as numbers (lines or 1-based rows)."""
        return self.lines(np.arange(self.rows))

    def text(self, column: str, *, required: bool) -> pd.Series:
        """The column as trimmed strings (missing: ``None``); with ``required`` a missing cell
        is an error naming its row."""
        trimmed = self.trimmed(column)
        series = pd.Series(trimmed.to_numpy(zero_copy_only=False), dtype=object)
        if required and series.isna().any():
            row = int(np.flatnonzero(series.isna().to_numpy())[0])
            raise self.error(row, column, "empty cell; a value is required")
        return series

    def trimmed(self, column: str) -> pa.ChunkedArray:
        """The column as trimmed Arrow strings (an empty cell null)."""
        values = self.table[column]
        if not (
            pa.types.is_string(values.type)
            or pa.types.is_large_string(values.type)
            or pa.types.is_null(values.type)
        ):
            values = pc.cast(values, pa.string())
        trimmed = pc.utf8_trim_whitespace(values)
        return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, trimmed.type), trimmed)

    def numbers(self, column: str) -> pa.Array:
        """The column as float64: a blank cell is missing (null); ``nan`` or ``inf`` written in
        a cell stay values (the plausibility check refuses them); anything else that is not a
        number is an error naming its row. With a decimal comma, a dot separates thousands."""
        values = self.table[column]
        kind = values.type
        if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_decimal(kind):
            return pc.cast(values, pa.float64()).combine_chunks()
        if pa.types.is_null(kind):
            return pa.nulls(self.rows, pa.float64())
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise MalformedSourceError(f"{self.path}: column {column!r} holds {kind}, not numbers")
        text = self.text(column, required=False)
        written_nan = text.str.lower().isin(_NAN_WORDS)
        if self.decimal == ",":
            grouped = text.str.fullmatch(_COMMA_NUMBER).fillna(False).astype(bool)
            written = text.where(~grouped, text.str.replace(".", "", regex=False)
                                 .str.replace(",", ".", regex=False))
        else:
            grouped, written = None, text
        numbers = pd.to_numeric(written, errors="coerce")
        bad = (numbers.isna() & text.notna() & ~written_nan).to_numpy()
        if grouped is not None:  # '1.23' is no number with a decimal comma (nor is '1.5')
            words = text.str.strip().str.lower().str.lstrip("+-").isin({"inf", "infinity", "nan"})
            bad = bad | (text.notna() & ~grouped & ~words).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise self.error(row, column, f"{text.iloc[row]!r} is not a number"
                             + self._number_hint(text.iloc[row]))
        return pa.array(numbers.to_numpy(dtype=float), pa.float64(), mask=text.isna().to_numpy())

    def _number_hint(self, cell: str) -> str:
        if self.decimal == "." and _DECIMAL_COMMA.match(cell):
            return "; give --decimal ',' if the file writes decimals with a comma"
        if self.decimal == "," and "." in cell:
            return (" written with --decimal ',': a dot there separates thousands (1.234,5 is "
                    "1234.5); leave --decimal out if the file writes decimals with a dot")
        return ""


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
    if used == ",":  # the file is comma-separated already: only the option is wrong
        return MalformedSourceError(
            f"{path}: the header is one column, {names[0]!r}: the file's cells are separated by "
            f"',' (a comma-separated CSV), not {_shown(form.delimiter)!r}; leave --delimiter "
            "out (a comma is the default)")
    with path.open(newline="", encoding=form.encoding, errors="replace") as handle:
        rows = csv.reader(handle, delimiter=used)
        next(rows, None)
        second = next(rows, [])
    decimal = (" and --decimal ','" if form.decimal == "."
               and any(_DECIMAL_COMMA.match(cell.strip()) for cell in second) else "")
    return MalformedSourceError(
        f"{path}: the header is one column, {names[0]!r}: the file's cells are separated by "
        f"{_shown(used)!r}, not {_shown(form.delimiter)!r}; give --delimiter "
        f"'{_shown(used)}'{decimal}, or save it as a comma-separated CSV")


def _csv_problem(path: Path, width: int, form: CsvFormat, error: Exception) -> MalformedSourceError:
    """What is wrong with a CSV that pyarrow could not read: a line that is not ``form``'s
    text, a ragged line, or pyarrow's own reason."""
    undecodable = _undecodable_line(path, form.encoding)
    if undecodable is not None:
        return undecodable
    ragged = _ragged_line(path, width, form)
    if ragged is not None:
        line, cells = ragged
        return MalformedSourceError(
            f"{path}: line {line}: {cells} cell(s), but the header has {width} columns "
            f"(cells separated by {_shown(form.delimiter)!r}; --delimiter names another)")
    reason = " ".join(str(error).split())
    return MalformedSourceError(f"{path}: not a readable CSV file ({reason})")


def _ragged_line(path: Path, width: int, form: CsvFormat) -> tuple[int, int] | None:
    """The first line whose number of cells differs from the header's, if any."""
    with path.open(newline="", encoding=form.encoding, errors="replace") as handle:
        reader = csv.reader(handle, delimiter=form.delimiter)
        next(reader, None)
        for cells in reader:
            if len(cells) != width:
                return reader.line_num, len(cells)
    return None


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


@dataclass(frozen=True)
class SourceStream(SourceRows):
    """A file whose header is read and checked, opened to read its rows: in chunks
    (:meth:`chunks`) or at once (:meth:`whole`). ``columns`` are the kept columns, named as
    the column mapping reads them."""

    columns: list[str]
    decimal: str
    _batches: Callable[[bool], Iterator[pa.RecordBatch] | pa.Table]

    def chunks(self) -> Iterator[SourceTable]:
        """The file's rows, a block (CSV) or batch (Parquet) at a time."""
        first = 0
        for batch in self._batches(True):
            yield SourceTable(self.path, self.kind, pa.Table.from_batches([batch]), self.decimal,
                              first_row=first)
            first += batch.num_rows

    def whole(self) -> SourceTable:
        """The whole file as one table."""
        return SourceTable(self.path, self.kind, self._batches(False), self.decimal)


def _csv_batches(path: Path, header: list[str], names: list[str | None], form: CsvFormat
                 ) -> Callable[[bool], Iterator[pa.RecordBatch] | pa.Table]:
    internal = [name if name is not None else _LEFT_OUT.format(i) for i, name in enumerate(names)]
    kept = [name for name in names if name is not None]
    convert = pcsv.ConvertOptions(column_types=dict.fromkeys(kept, pa.string()),
                                  include_columns=kept, strings_can_be_null=False)
    parse = pcsv.ParseOptions(delimiter=form.delimiter)

    def read(streamed: bool) -> Iterator[pa.RecordBatch] | pa.Table:
        options = pcsv.ReadOptions(column_names=internal, skip_rows=1, encoding=form.encoding,
                                   block_size=CHUNK_BYTES)
        try:
            if not streamed:
                return pcsv.read_csv(str(path), read_options=options, parse_options=parse,
                                     convert_options=convert)
            return _guarded(pcsv.open_csv(str(path), read_options=options, parse_options=parse,
                                          convert_options=convert), path, len(header), form)
        except (pa.ArrowInvalid, UnicodeDecodeError) as error:
            raise _csv_problem(path, len(header), form, error) from None
        except OSError as error:
            raise MalformedSourceError(
                f"{path}: cannot be read ({error.strerror or error})") from None

    return read


def _guarded(reader: pcsv.CSVStreamingReader, path: Path, width: int, form: CsvFormat
             ) -> Iterator[pa.RecordBatch]:
    """``reader``'s batches, a problem met in a later block told as in the first."""
    try:
        yield from reader
    except (pa.ArrowInvalid, UnicodeDecodeError) as error:
        raise _csv_problem(path, width, form, error) from None


def _parquet_batches(path: Path, parquet: pq.ParquetFile, names: list[str | None]
                     ) -> Callable[[bool], Iterator[pa.RecordBatch] | pa.Table]:
    original = parquet.schema_arrow.names
    kept = [source for source, name in zip(original, names, strict=True) if name is not None]
    renamed = [name for name in names if name is not None]

    def unreadable(error: Exception) -> MalformedSourceError:
        reason = " ".join(str(error).split())
        return MalformedSourceError(f"{path}: not a readable Parquet file ({reason})")

    def stream() -> Iterator[pa.RecordBatch]:
        try:
            for batch in parquet.iter_batches(batch_size=CHUNK_ROWS, columns=kept):
                yield batch.rename_columns(renamed)
        except (pa.ArrowInvalid, OSError) as error:
            raise unreadable(error) from None

    def read(streamed: bool) -> Iterator[pa.RecordBatch] | pa.Table:
        if streamed:
            return stream()
        try:
            return parquet.read(columns=kept).rename_columns(renamed)
        except (pa.ArrowInvalid, OSError) as error:
            raise unreadable(error) from None

    return read


def _checked_path(path: Path) -> str:
    """The kind of file ``path`` is (``csv`` or ``parquet``), once it is known to be a
    non-empty regular file of a kind this reads."""
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
    return kind


def _check_columns(path: Path, columns: list[str], required: list[str],
                   optional: Iterable[str] | None, mapping: ColumnMapping | None) -> None:
    missing = [name for name in required if name not in columns]
    if missing:
        raise MalformedSourceError(
            f"{path}: missing required column(s) {', '.join(map(repr, missing))}; "
            f"found {columns}" + ("" if mapping else
                                  "; --columns 'NAME=TARGET' reads a column under another name"))
    if optional is not None:
        allowed = set(required) | set(optional)
        unexpected = [name for name in columns if name not in allowed]
        if unexpected:
            raise MalformedSourceError(
                f"{path}: unexpected column(s) {', '.join(map(repr, unexpected))}; the columns "
                f"are {', '.join(required)}"
                + (f" and optionally {', '.join(sorted(set(optional)))}" if optional else "")
                + f"; --columns '{unexpected[0]}=TARGET' reads it as another column, "
                f"--columns '{unexpected[0]}=' leaves it out"
            )


def open_source(
    path: str | Path, *, required: Iterable[str] = (), optional: Iterable[str] | None = (),
    form: CsvFormat | None = None, mapping: ColumnMapping | None = None,
) -> SourceStream:
    """Open ``path`` (``.csv`` or ``.parquet``; a CSV as ``form`` says), read its header with
    ``mapping`` applied, and check its columns; the rows are read from the stream.

    Every name in ``required`` must be a column; with ``optional`` a collection, every other
    column must be in it (``None``: any other column is allowed, e.g. a wide file's ids).
    """
    path = Path(path)
    form = form or CsvFormat()
    kind = _checked_path(path)
    try:
        if kind == "csv":
            header = _csv_header(path, form)
            problem = _other_delimiter(path, header, form)
            if problem is not None:
                raise problem
        else:
            try:
                parquet = pq.ParquetFile(str(path))
            except (pa.ArrowInvalid, OSError) as error:
                reason = " ".join(str(error).split())
                raise MalformedSourceError(
                    f"{path}: not a readable Parquet file ({reason})") from None
            header = list(parquet.schema_arrow.names)
    except OSError as error:  # a file that cannot be opened (permissions, a device, ...)
        raise MalformedSourceError(f"{path}: cannot be read ({error.strerror or error})") from None
    _check_unique(path, header)
    names: list[str | None] = mapping.rename(path, header) if mapping else list(header)
    columns = [name for name in names if name is not None]
    _check_columns(path, columns, list(required), optional, mapping)
    batches = (_csv_batches(path, header, names, form) if kind == "csv"
               else _parquet_batches(path, parquet, names))
    return SourceStream(path, kind, columns, form.decimal if kind == "csv" else ".", batches)


def read_source(
    path: str | Path, *, required: Iterable[str] = (), optional: Iterable[str] | None = (),
    form: CsvFormat | None = None, mapping: ColumnMapping | None = None,
) -> SourceTable:
    """Read the whole of ``path`` (see :func:`open_source`); a file without data rows is
    refused."""
    source = open_source(path, required=required, optional=optional, form=form,
                         mapping=mapping).whole()
    if source.rows == 0:
        raise MalformedSourceError(f"{path}: empty file, a header but no data rows")
    return source

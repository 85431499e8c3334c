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
:mod:`~tasks.ingest.column_mapping`).

:meth:`SourceTable.numbers` and :meth:`SourceTable.text` turn a column into values, refusing a
cell that is not one with an error naming file, row and column. A large file is read in chunks
(:func:`open_source`, :meth:`SourceStream.chunks`: a CSV block or a Parquet batch at a time), so
that only the columns a reader keeps, in their compact form, grow with the file. A file is
opened and read from disk once: a CSV's header, its rows and the scan naming the line of a CSV
pyarrow refuses read the same bytes (:mod:`~tasks.ingest.csv_bytes`).
Rows are named as a reader finds them: ``line N`` of a CSV (the header is line 1), ``row N``
(1-based) of a Parquet file, counted from the file's start in every chunk; a table's rows by
its :class:`SourceRows` (``SourceTable.at``), which the checks are given.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tasks.ingest.column_mapping import ColumnMapping, parse_pairs
from tasks.ingest.csv_bytes import CsvBytes, Undecodable, first_problem
from tasks.ingest.errors import MalformedSourceError, SourceNotFoundError
from tasks.protocol.comma_lists import CommaList

__all__ = ["FORMATS", "CsvFormat", "FileOptions", "SourceRows", "SourceStream", "SourceTable",
           "check_columns", "open_source", "read_source"]

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
    warehouse column (:mod:`~tasks.ingest.column_mapping`)."""

    columns: CommaList | None = Field(
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
    line 1) or ``row N`` (1-based) of a Parquet file, for 0-based row indices of a part of the
    file that starts at the file's row ``first_row`` (a chunk; 0: the whole file). The checks
    of a file's cells are given this, not the cells."""

    path: Path
    kind: str
    first_row: int = field(default=0, kw_only=True)

    def where(self, row: int) -> str:
        """``line N`` (CSV, header = line 1) or ``row N`` (Parquet) of the 0-based ``row``."""
        row += self.first_row
        return f"line {row + 2}" if self.kind == "csv" else f"row {row + 1}"

    def lines(self, rows: np.ndarray) -> np.ndarray:
        """What :meth:`where` prints for each of ``rows``, as numbers."""
        return np.asarray(rows, dtype=np.int64) + self.first_row + (2 if self.kind == "csv"
                                                                    else 1)

    @property
    def row_label(self) -> str:
        return "line" if self.kind == "csv" else "row"

    def error(self, row: int, column: str, message: str) -> MalformedSourceError:
        """An error naming the file, ``row`` (0-based) and ``column``."""
        return MalformedSourceError(f"{self.path}: {self.where(row)}, column {column!r}: {message}")

    def refuse_blank(self, column: str, values: pa.Array | pa.ChunkedArray) -> None:
        """Refuse the first blank cell (null) of ``values``, a column every cell of which must
        hold a value."""
        if values.null_count:
            row = int(np.flatnonzero(pc.is_null(values).to_numpy(zero_copy_only=False))[0])
            raise self.error(row, column, "empty cell; a value is required")

    def of_file(self) -> SourceRows:
        """The file's rows counted from its start."""
        return replace(self, first_row=0)


@dataclass(frozen=True)
class SourceTable:
    """A file's columns as read (``table``), turned into values by :meth:`text` and
    :meth:`numbers`; ``at`` says where its rows are in the file (a chunk's first row is the
    file's row ``at.first_row``), naming them in the errors of those and every other check."""

    table: pa.Table
    at: SourceRows
    decimal: str = "."

    @property
    def path(self) -> Path:
        return self.at.path

    @property
    def first_row(self) -> int:
        return self.at.first_row

    @property
    def rows(self) -> int:
        return self.table.num_rows

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def text(self, column: str, *, required: bool) -> pd.Series:
        """The column as trimmed strings (missing: ``None``); with ``required`` a missing cell
        is an error naming its row."""
        trimmed = self.trimmed(column)
        if required:
            self.at.refuse_blank(column, trimmed)
        return pd.Series(trimmed.to_numpy(zero_copy_only=False), dtype=object)

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
            raise MalformedSourceError(
                f"{self.at.path}: column {column!r} holds {kind}, not numbers")
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
            raise self.at.error(row, column, f"{text.iloc[row]!r} is not a number"
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


def _undecodable(source: CsvBytes, encoding: str, found: Undecodable | None
                 ) -> MalformedSourceError | None:
    """An error naming the first line that is not ``encoding`` text (``found``), if any."""
    if found is None:
        return None
    return MalformedSourceError(
        f"{source.path}: line {found.line} is not {encoding} text (byte 0x{found.byte:02x} at "
        f"character {found.character}); save the file as UTF-8 (Excel: 'CSV UTF-8'), "
        "or give --encoding with the encoding it was saved in "
        "(e.g. --encoding latin-1)")


def _csv_header(source: CsvBytes, form: CsvFormat) -> list[str]:
    encoding = "utf-8-sig" if codecs.lookup(form.encoding).name == "utf-8" else form.encoding
    try:
        rows = source.records(1, encoding, "strict", form.delimiter)
    except UnicodeDecodeError as error:
        found, _ = first_problem(source.from_start(), form.encoding, form.delimiter, None)
        # a character cut off by the file's end is no line's fault: said as it is
        raise (_undecodable(source, form.encoding, found) or MalformedSourceError(
            f"{source.path}: not a readable CSV file ({error})")) from None
    except csv.Error as error:
        raise MalformedSourceError(f"{source.path}: not a readable CSV file ({error})") from None
    if not rows:
        raise MalformedSourceError(f"{source.path}: empty file, no header and no rows")
    return [name.strip() for name in rows[0]]


def _other_delimiter(source: CsvBytes, names: list[str], form: CsvFormat
                     ) -> MalformedSourceError | None:
    """An error naming the delimiter a one-column header really uses, and the options that
    read the file (``;`` and decimal commas: a CSV as European Excel saves it)."""
    path = source.path
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
    rows = source.records(2, form.encoding, "replace", used)
    second = rows[1] if len(rows) > 1 else []
    decimal = (" and --decimal ','" if form.decimal == "."
               and any(_DECIMAL_COMMA.match(cell.strip()) for cell in second) else "")
    return MalformedSourceError(
        f"{path}: the header is one column, {names[0]!r}: the file's cells are separated by "
        f"{_shown(used)!r}, not {_shown(form.delimiter)!r}; give --delimiter "
        f"'{_shown(used)}'{decimal}, or save it as a comma-separated CSV")


def _csv_problem(source: CsvBytes, width: int, form: CsvFormat, error: Exception
                 ) -> MalformedSourceError:
    """What is wrong with a CSV that pyarrow could not read: a line that is not ``form``'s
    text, a ragged line, or pyarrow's own reason (one scan of the file's bytes)."""
    found, ragged = first_problem(source.from_start(), form.encoding, form.delimiter, width)
    undecodable = _undecodable(source, form.encoding, found)
    if undecodable is not None:
        return undecodable
    if ragged is not None:
        line, cells = ragged
        return MalformedSourceError(
            f"{source.path}: line {line}: {cells} cell(s), but the header has {width} columns "
            f"(cells separated by {_shown(form.delimiter)!r}; --delimiter names another)")
    reason = " ".join(str(error).split())
    return MalformedSourceError(f"{source.path}: not a readable CSV file ({reason})")


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
class SourceStream:
    """A file whose header is read and checked, opened to read its rows: in chunks
    (:meth:`chunks`) or at once (:meth:`whole`); ``at`` says where its rows are. ``columns``
    are the kept columns, named as the column mapping reads them."""

    at: SourceRows
    columns: list[str]
    decimal: str
    _batches: Callable[[bool], Iterator[pa.RecordBatch] | pa.Table]
    _close: Callable[[], None]

    def chunks(self) -> Iterator[SourceTable]:
        """The file's rows, a block (CSV) or batch (Parquet) at a time."""
        first = 0
        for batch in self._batches(True):
            yield SourceTable(pa.Table.from_batches([batch]),
                              replace(self.at, first_row=first), self.decimal)
            first += batch.num_rows

    def whole(self) -> SourceTable:
        """The whole file as one table; a file without data rows is refused."""
        table = SourceTable(self._batches(False), self.at, self.decimal)
        if table.rows == 0:
            raise MalformedSourceError(f"{self.at.path}: empty file, a header but no data rows")
        return table

    def close(self) -> None:
        """Close the file (reading its rows closes it too)."""
        self._close()

    def __enter__(self) -> SourceStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _csv_batches(source: CsvBytes, header: list[str], names: list[str | None], form: CsvFormat
                 ) -> Callable[[bool], Iterator[pa.RecordBatch] | pa.Table]:
    internal = [name if name is not None else _LEFT_OUT.format(i) for i, name in enumerate(names)]
    kept = [name for name in names if name is not None]
    convert = pcsv.ConvertOptions(column_types=dict.fromkeys(kept, pa.string()),
                                  include_columns=kept, strings_can_be_null=False)
    parse = pcsv.ParseOptions(delimiter=form.delimiter)

    def read(streamed: bool) -> Iterator[pa.RecordBatch] | pa.Table:
        options = pcsv.ReadOptions(column_names=internal, skip_rows=1, encoding=form.encoding,
                                   block_size=CHUNK_BYTES)
        reading = False  # the batches are read on: they close the file
        try:
            if not streamed:
                return pcsv.read_csv(source.stream(), read_options=options,
                                     parse_options=parse, convert_options=convert)
            reader = pcsv.open_csv(source.stream(), read_options=options, parse_options=parse,
                                   convert_options=convert)
            reading = True
            return _guarded(reader, source, len(header), form)
        except (pa.ArrowInvalid, UnicodeDecodeError) as error:
            raise _csv_problem(source, len(header), form, error) from None
        except OSError as error:
            raise MalformedSourceError(
                f"{source.path}: cannot be read ({error.strerror or error})") from None
        finally:
            if not reading:
                source.close()

    return read


def _guarded(reader: pcsv.CSVStreamingReader, source: CsvBytes, width: int, form: CsvFormat
             ) -> Iterator[pa.RecordBatch]:
    """``reader``'s batches, a problem met in a later block told as in the first; the file
    closed once they are read (or left)."""
    try:
        yield from reader
    except (pa.ArrowInvalid, UnicodeDecodeError) as error:
        raise _csv_problem(source, width, form, error) from None
    finally:
        source.close()


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


def check_columns(path: Path, columns: list[str], required: Iterable[str],
                  optional: Iterable[str] | None, mapping: ColumnMapping | None) -> None:
    """Every name in ``required`` is one of ``columns``; with ``optional`` a collection, every
    other column is in it (``None``: any other column is allowed)."""
    required = list(required)
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
    with ExitStack() as opened:  # the file closed again unless its stream is returned
        try:
            if kind == "csv":
                csv_file = CsvBytes(path, CHUNK_BYTES)
                opened.callback(csv_file.close)
                header = _csv_header(csv_file, form)
                problem = _other_delimiter(csv_file, header, form)
                if problem is not None:
                    raise problem
            else:
                try:
                    parquet = pq.ParquetFile(str(path))
                except (pa.ArrowInvalid, OSError) as error:
                    reason = " ".join(str(error).split())
                    raise MalformedSourceError(
                        f"{path}: not a readable Parquet file ({reason})") from None
                opened.callback(parquet.close)
                header = list(parquet.schema_arrow.names)
        except OSError as error:  # a file that cannot be opened (permissions, a device, ...)
            raise MalformedSourceError(
                f"{path}: cannot be read ({error.strerror or error})") from None
        _check_unique(path, header)
        names: list[str | None] = mapping.rename(path, header) if mapping else list(header)
        columns = [name for name in names if name is not None]
        check_columns(path, columns, required, optional, mapping)
        batches = (_csv_batches(csv_file, header, names, form) if kind == "csv"
                   else _parquet_batches(path, parquet, names))
        close = opened.pop_all().close
    return SourceStream(SourceRows(path, kind), columns, form.decimal if kind == "csv" else ".",
                        batches, close)


def read_source(
    path: str | Path, *, required: Iterable[str] = (), optional: Iterable[str] | None = (),
    form: CsvFormat | None = None, mapping: ColumnMapping | None = None,
) -> SourceTable:
    """Read the whole of ``path`` (see :func:`open_source`); a file without data rows is
    refused."""
    return open_source(path, required=required, optional=optional, form=form,
                       mapping=mapping).whole()

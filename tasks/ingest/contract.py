"""An operator's file (CSV or Parquet, by extension), opened once, and the contract it follows.

:func:`open_file` checks the path, reads the header, refuses a repeated or unnamed column and
reads the file's own column names as the warehouse's through a :class:`ColumnMapping`
(``--columns "Asset Name=building_id"``, ``--columns-file``; ``SOURCE=`` leaves a column out).
Its rows then come from pyarrow's readers in chunks (a CSV block, a Parquet batch), so that only
what a reader keeps grows with the file. A CSV is comma-separated UTF-8 with decimal points
unless :class:`CsvFormat` says otherwise (``--delimiter``, ``--decimal``, ``--encoding``); a file
written otherwise (European Excel's ``;`` and decimal commas, Latin-1 text) is refused naming the
line and the option that reads it. Its cells are text (an empty cell is missing, surrounding
spaces are trimmed); with ``--decimal ','`` a dot separates thousands (``1.234,5`` is 1234.5,
``1.23`` is refused). A file is opened and read from disk once: a CSV of at most a block at once
(its header, its rows and, should pyarrow refuse it, the scan naming the line read that buffer),
a larger one as a stream.

A reader declares its file's :class:`FileContract`: its :class:`Column` s (what each one's
cells are and must be) and the columns no two rows may share (``key``), or what every other
column is (``others``: a wide file's column per building). :meth:`FileContract.judge` turns
the cells into values, chunk after chunk, refusing the first bad one naming its ``line N`` (a
CSV, the header being line 1) or ``row N`` (Parquet) and its column. What is a reader's own
stays with it: timestamps (its :class:`~.timestamps.TimeReader`), time zones and calendars.

>>> from tasks.ingest.plausibility import TEMPERATURE_C
>>> contract = FileContract("a thermometer file", (
...     Column("site_id", "id", what="site id"), Column("ts", "time"),
...     Column("temperature_c", "number", filled=False, bound=TEMPERATURE_C)))
>>> contract.required, contract.optional
(('site_id', 'ts', 'temperature_c'), ())
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tasks.ingest.errors import MalformedSourceError, SourceNotFoundError
from tasks.ingest.plausibility import Bound, ImplausiblePolicy, Tally, check_column
from tasks.protocol.comma_lists import CommaList

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""File extensions read, and as what."""
CHUNK_BYTES = 16 << 20
"""How much of a CSV is read at a time (a block of pyarrow's reader; a smaller file at once)."""
CHUNK_ROWS = 250_000
"""How many rows of a Parquet file are read at a time."""
HEAD_BYTES = 8192
"""How much of a CSV is decoded at first to read its header (more if the header is longer)."""
_DELIMITERS = {",": ",", ";": ";", "|": "|", "\t": "\t", "tab": "\t"}
UNPRINTABLE = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
"""Characters an id may not hold (a regular expression's class, RE2 and Python alike): a
control character (Unicode's Cc: NUL, a line break, a tab, ...) or one that reorders the text
around it (the bidirectional overrides, isolates and marks) makes an id that cannot be typed,
prints as something it is not (``b1<U+202E>2b`` shows as ``b1b2``) or, NUL, can never be
selected. An id starting with ``=``, ``+``, ``@`` or ``-`` is text like any other here."""
_DECIMAL_COMMA = re.compile(r"^[+-]?\d+,\d+$")
_WORD = r"^[+-]?(?:inf|infinity|nan)$"
_NUMBER = r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf|infinity|nan)$"
"""A cell read as a number (case aside), as pandas reads one: ``nan`` and ``inf`` are values."""
_COMMA_NUMBER = r"^[+-]?(?:\d{1,3}(?:\.\d{3})+|\d*)(?:,\d*)?(?:[eE][+-]?\d+)?$"
"""A number written with a decimal comma: a dot only between groups of three digits."""
CellKind = Literal["id", "text", "number", "time"]


class CsvFormat(BaseModel):
    """How a CSV file is written (the options of the commands that read one; a Parquet file
    carries its own types and ignores them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delimiter: str = Field(
        ",", description="The character between a CSV's cells: , (default), ; (as European "
        "Excel saves CSV), | or tab.")
    decimal: Literal[".", ","] = Field(
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
    warehouse column (:class:`ColumnMapping`)."""

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
        """``["Asset Name=building_id", "Notes="]`` checked to be ``SOURCE=TARGET`` pairs."""
        if value is None:
            return None
        checked = []
        for item in value:
            source, equals, target = item.rpartition("=")
            if not equals or not source.strip():
                raise ValueError(f"{item!r} is not SOURCE=TARGET (e.g. 'Asset Name=building_id'; "
                                 "'Notes=' leaves a column out)")
            checked.append(f"{source.strip()}={target.strip()}")
        return tuple(checked)

    def column_mapping(self) -> ColumnMapping:
        """The mapping the options give (the mapping file read now)."""
        return ColumnMapping.from_options(self.columns, self.columns_file)


class _Pair(NamedTuple):
    source: str
    target: str | None
    origin: str
    """Where the pair was given: ``--columns`` or ``--columns-file FILE (line N)``."""


@dataclass(frozen=True)
class ColumnMapping:
    """The file's column SOURCE read as TARGET (``None``: left out), from ``--columns`` and
    ``--columns-file`` (a CSV ``source,target``, a blank target leaving the column out, or a JSON
    object, ``null`` or ``""`` leaving it out). A source the file lacks, a target the file kind
    has no column of or that the file has already, two sources of one target and a source
    mapped twice are refused, naming both names; the other columns keep their names."""

    pairs: tuple[_Pair, ...] = ()

    @classmethod
    def from_options(cls, columns: Sequence[str] | None, columns_file: str | None
                     ) -> ColumnMapping:
        pairs = [_Pair(s, t or None, "--columns")
                 for s, _, t in (item.rpartition("=") for item in columns or ())]
        if columns_file is not None:
            pairs += _read_mapping_file(Path(columns_file))
        seen: dict[str, _Pair] = {}
        targets: dict[str | None, _Pair] = {}
        for pair in pairs:
            if pair.source in seen:
                first = seen[pair.source]
                raise MalformedSourceError(
                    f"{pair.origin} maps column {pair.source!r} a second time (to "
                    f"{pair.target!r}; {first.origin} maps it to {first.target!r}); map each "
                    "column once")
            if pair.target is not None and pair.target in targets:
                raise MalformedSourceError(
                    f"{pair.origin} maps both {targets[pair.target].source!r} and "
                    f"{pair.source!r} to {pair.target!r}; one column of the file is read as "
                    "each target")
            seen[pair.source] = targets[pair.target] = pair
        return cls(tuple(pairs))

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def rename(self, path: Path, names: Sequence[str]) -> list[str | None]:
        """The file's column ``names`` as the mapping reads them (``None``: left out)."""
        by_source = {p.source: p for p in self.pairs}
        for pair in self.pairs:
            if pair.source not in names:
                raise MalformedSourceError(
                    f"{path}: {pair.origin} maps column {pair.source!r} to "
                    f"{pair.target or 'nothing (left out)'!r}, but the file has no column "
                    f"{pair.source!r}; its columns are {list(names)}")
        for pair in self.pairs:
            if pair.target in names and pair.target not in by_source:
                raise MalformedSourceError(
                    f"{path}: {pair.origin} maps column {pair.source!r} to {pair.target!r}, "
                    f"but the file already has a column {pair.target!r}; map that one "
                    f"elsewhere or leave it out ('{pair.target}=')")
        return [by_source[n].target if n in by_source else n for n in names]


def _read_mapping_file(path: Path) -> list[_Pair]:
    origin = f"--columns-file {path}"
    if not path.is_file():
        raise MalformedSourceError(f"{origin}: no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise MalformedSourceError(f"{origin}: cannot be read ({error})") from None
    if path.suffix.lower() == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise MalformedSourceError(f"{origin}: not valid JSON ({error})") from None
        if not isinstance(raw, dict) or not all(
                isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in raw.items()):
            raise MalformedSourceError(
                f"{origin}: a JSON mapping is one object of column names, "
                '{"Asset Name": "building_id", "Notes": null}')
        return [_Pair(k.strip(), (v or "").strip() or None, origin) for k, v in raw.items()]
    if path.suffix.lower() != ".csv":
        raise MalformedSourceError(f"{origin}: a mapping file is a .csv (source,target) or a "
                                   ".json object")
    rows = list(csv.reader(text.splitlines()))
    if not rows or [c.strip().lower() for c in rows[0]] != ["source", "target"]:
        raise MalformedSourceError(f"{origin}: line 1 must be the header source,target")
    pairs = []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != 2 or not row[0].strip():
            raise MalformedSourceError(
                f"{origin}: line {number}: a source column and a target (blank: left out), "
                f"found {row}")
        pairs.append(_Pair(row[0].strip(), row[1].strip() or None, f"{origin} (line {number})"))
    return pairs


@dataclass(frozen=True)
class SourceRows:
    """Where a file's rows are, to name them in errors: ``line N`` of a CSV (the header is
    line 1) or ``row N`` (1-based) of a Parquet file, for 0-based row indices of a part of the
    file that starts at the file's row ``first_row`` (a chunk; 0: the whole file)."""

    path: Path
    kind: str
    first_row: int = field(default=0, kw_only=True)

    def where(self, row: int) -> str:
        """``line N`` (CSV, header = line 1) or ``row N`` (Parquet) of the 0-based ``row``."""
        return f"{self.row_label} {self.lines(np.array([row]))[0]}"

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


@dataclass(frozen=True)
class SourceTable:
    """A chunk of a file's columns as read (``table``; a CSV's cells as text); ``at`` says where
    its rows are in the file, naming them in the errors of :meth:`numbers` and every other
    check."""

    table: pa.Table
    at: SourceRows
    decimal: str = "."

    @property
    def rows(self) -> int:
        return self.table.num_rows

    def trimmed(self, column: str) -> pa.ChunkedArray:
        """The column as trimmed Arrow strings (an empty cell null)."""
        values = self.table[column]
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
                or pa.types.is_null(values.type)):
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
        text = self.trimmed(column).combine_chunks()
        if self.decimal == ".":
            try:  # what pyarrow reads as a number, pandas does too (and _NUMBER says)
                return pc.cast(text, pa.float64())
            except pa.ArrowInvalid:
                pass
        written = text
        if self.decimal == ",":  # grouped by dots, or a word (nan, inf)
            grouped = pc.match_substring_regex(text, _COMMA_NUMBER)
            written = pc.if_else(grouped, pc.replace_substring(
                pc.replace_substring(text, ".", ""), ",", "."), text)
        ok = pc.match_substring_regex(written, _NUMBER, ignore_case=True)
        if self.decimal == ",":
            ok = pc.and_(ok, pc.or_(grouped, pc.match_substring_regex(text, _WORD,
                                                                     ignore_case=True)))
        bad = pc.invert(pc.fill_null(ok, True)).to_numpy(zero_copy_only=False)
        if not bad.any():
            return pc.cast(written, pa.float64())
        row = int(np.flatnonzero(bad)[0])
        cell = text[row].as_py()
        hint = ""
        if self.decimal == "." and _DECIMAL_COMMA.match(cell):
            hint = "; give --decimal ',' if the file writes decimals with a comma"
        elif self.decimal == "," and "." in cell:
            hint = (" written with --decimal ',': a dot there separates thousands (1.234,5 is "
                    "1234.5); leave --decimal out if the file writes decimals with a dot")
        raise self.at.error(row, column, f"{cell!r} is not a number{hint}")


@dataclass
class SourceFile:
    """A file opened, its header read and checked, its rows read by :meth:`chunks` (closing the
    file) or judged by a :class:`FileContract`. ``columns`` are the kept columns, named as the
    ``mapping`` reads them."""

    at: SourceRows
    columns: list[str]
    mapping: ColumnMapping | None
    decimal: str
    batches: Iterator[pa.RecordBatch]
    close: Callable[[], None]

    def chunks(self) -> Iterator[SourceTable]:
        """The file's rows, a block (CSV) or batch (Parquet) at a time."""
        first = 0
        try:
            for batch in self.batches:
                yield SourceTable(pa.Table.from_batches([batch]),
                                  replace(self.at, first_row=first), self.decimal)
                first += batch.num_rows
        finally:
            self.close()

    def __enter__(self) -> SourceFile:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _checked_path(path: Path) -> str:
    """The kind of file ``path`` is (``csv`` or ``parquet``), once it is known to be a
    non-empty regular file of a kind this reads."""
    if path.is_dir():
        raise MalformedSourceError(
            f"{path} is a folder, not a file; give the path of one .csv or .parquet file")
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise MalformedSourceError(
            f"{path}: unknown file kind {path.suffix!r}; give a .csv or .parquet file")
    if not path.exists():
        raise SourceNotFoundError(f"file does not exist: {path}")
    if not path.is_file():
        raise MalformedSourceError(f"{path} is not a regular file; give a .csv or .parquet file")
    if path.stat().st_size == 0:
        raise MalformedSourceError(f"{path}: empty file, no header and no rows")
    return kind


def open_file(path: str | Path, form: CsvFormat | None = None,
              mapping: ColumnMapping | None = None) -> SourceFile:
    """Open ``path`` (a CSV read as ``form`` says), read its header and name its columns as
    ``mapping`` reads them; a column's name must be there, and once."""
    path = Path(path)
    form = form or CsvFormat()
    kind = _checked_path(path)
    try:
        header, read, close = _open_csv(path, form) if kind == "csv" else _open_parquet(path)
    except OSError as error:  # a file that cannot be opened (permissions, a device, ...)
        raise MalformedSourceError(
            f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        seen: set[str] = set()
        for position, name in enumerate(header, start=1):
            if name == "":
                raise MalformedSourceError(f"{path}: column {position} of the header has no name")
            if name in seen:
                raise MalformedSourceError(f"{path}: column {name!r} appears more than once in "
                                           f"the header (column {position})")
            seen.add(name)
        names = mapping.rename(path, header) if mapping else list(header)
    except MalformedSourceError:
        close()
        raise
    return SourceFile(SourceRows(path, kind), [n for n in names if n is not None], mapping,
                      form.decimal if kind == "csv" else ".", read(names), close)


def _open_parquet(path: Path) -> tuple[list[str], Callable, Callable[[], None]]:
    def unreadable(error: Exception) -> MalformedSourceError:
        reason = " ".join(str(error).split())
        return MalformedSourceError(f"{path}: not a readable Parquet file ({reason})")

    try:
        parquet = pq.ParquetFile(str(path))
    except (pa.ArrowInvalid, OSError) as error:
        raise unreadable(error) from None
    header = list(parquet.schema_arrow.names)

    def read(names: list[str | None]) -> Iterator[pa.RecordBatch]:
        kept = [source for source, name in zip(header, names, strict=True) if name is not None]
        try:
            for batch in parquet.iter_batches(batch_size=CHUNK_ROWS, columns=kept):
                yield batch.rename_columns([name for name in names if name is not None])
        except (pa.ArrowInvalid, OSError) as error:
            raise unreadable(error) from None

    return header, read, parquet.close


def _records(data: bytes, whole: bool, count: int, encoding: str, errors: str,
             delimiter: str) -> list[list[str]] | None:
    """The first ``count`` records of a CSV starting with ``data`` (all of it when ``whole``)
    as the csv module reads the file opened as text; ``None`` when ``data`` holds fewer and
    the file has more."""
    if codecs.lookup(encoding).name == "utf-8":
        encoding = "utf-8-sig"
    decoder = codecs.getincrementaldecoder(encoding)(errors)
    text = decoder.decode(data)
    if not whole:
        text = text[:text.rfind("\n") + 1]  # the last line may be cut
    lines = io.StringIO(text, newline="")
    try:
        rows = list(itertools.islice(csv.reader(lines, delimiter=delimiter), count))
    except csv.Error:
        if whole:
            raise
        return None
    if whole and lines.tell() == len(text) and (len(rows) < count or text[-1:] != "\n"):
        decoder.decode(b"", final=True)  # read to the end: a character cut off there is refused
    return rows if len(rows) == count or whole else None


def _shown(delimiter: str) -> str:
    return "tab" if delimiter == "\t" else delimiter


def _undecodable(path: Path, lines: BinaryIO, encoding: str) -> MalformedSourceError | None:
    """An error naming the first line of ``lines`` that is not ``encoding`` text, if any."""
    decoder = codecs.getincrementaldecoder(encoding)()
    with lines:
        for number, line in enumerate(lines, start=1):
            try:
                decoder.decode(line)
            except UnicodeDecodeError as error:
                return MalformedSourceError(
                    f"{path}: line {number} is not {encoding} text (byte "
                    f"0x{line[error.start]:02x} at character {error.start + 1}); save the file "
                    "as UTF-8 (Excel: 'CSV UTF-8'), or give --encoding with the encoding it "
                    "was saved in (e.g. --encoding latin-1)")
    return None  # a character cut off by the file's end is no line's fault


def _open_csv(path: Path, form: CsvFormat) -> tuple[list[str], Callable, Callable[[], None]]:
    file = pa.OSFile(str(path))  # the one opening: pyarrow reads the rest of a larger file
    size = file.size()
    data = file.read(size if size <= CHUNK_BYTES else HEAD_BYTES)

    def head(count: int, errors: str, delimiter: str) -> list[list[str]]:
        nonlocal data
        n = HEAD_BYTES
        while True:
            if len(data) < min(n, size):
                data += file.read(min(n, size) - len(data))
            rows = _records(data[:n], n >= size, count, form.encoding, errors, delimiter)
            if rows is not None:
                return rows
            n *= 2

    def from_start() -> BinaryIO:  # the bytes to scan: the buffer, or the file again
        return io.BytesIO(data) if len(data) == size else path.open("rb")

    try:
        try:
            rows = head(1, "strict", form.delimiter)
        except UnicodeDecodeError as error:
            raise _undecodable(path, from_start(), form.encoding) or MalformedSourceError(
                f"{path}: not a readable CSV file ({error})") from None
        except csv.Error as error:
            raise MalformedSourceError(f"{path}: not a readable CSV file ({error})") from None
        if not rows:
            raise MalformedSourceError(f"{path}: empty file, no header and no rows")
        header = [name.strip() for name in rows[0]]
        used = next((d for d in (";", "\t", "|", ",") if len(header) == 1
                     and d != form.delimiter and d in header[0]), None)
        if used == ",":  # the file is comma-separated already: only the option is wrong
            raise MalformedSourceError(
                f"{path}: the header is one column, {header[0]!r}: the file's cells are "
                f"separated by ',' (a comma-separated CSV), not {_shown(form.delimiter)!r}; "
                "leave --delimiter out (a comma is the default)")
        if used is not None:  # European Excel: ';' and, in the second line, decimal commas
            rows = head(2, "replace", used)
            second = rows[1] if len(rows) > 1 else []
            decimal = (" and --decimal ','" if form.decimal == "."
                       and any(_DECIMAL_COMMA.match(cell.strip()) for cell in second) else "")
            raise MalformedSourceError(
                f"{path}: the header is one column, {header[0]!r}: the file's cells are "
                f"separated by {_shown(used)!r}, not {_shown(form.delimiter)!r}; give "
                f"--delimiter '{_shown(used)}'{decimal}, or save it as a comma-separated CSV")
    except BaseException:
        file.close()
        raise
    if len(data) == size:
        file.close()
        stream: pa.NativeFile = pa.BufferReader(data)
    else:
        file.seek(0)
        stream = file

    def read(names: list[str | None]) -> Iterator[pa.RecordBatch]:
        kept = [name for name in names if name is not None]
        ragged: list[tuple[int, int]] = []

        def bad_row(row: pcsv.InvalidRow) -> str:
            ragged.append((row.number, row.actual_columns))
            return "error"

        utf8 = codecs.lookup(form.encoding).name == "utf-8"
        try:
            yield from pcsv.open_csv(
                stream,
                read_options=pcsv.ReadOptions(
                    column_names=[n if n is not None else f"\x00{i}" for i, n in enumerate(names)],
                    skip_rows=1, encoding="utf8" if utf8 else form.encoding,
                    block_size=CHUNK_BYTES, use_threads=False),
                parse_options=pcsv.ParseOptions(delimiter=form.delimiter,
                                                invalid_row_handler=bad_row),
                convert_options=pcsv.ConvertOptions(column_types=dict.fromkeys(kept, pa.string()),
                                                    include_columns=kept,
                                                    strings_can_be_null=False))
        except (pa.ArrowInvalid, UnicodeDecodeError) as error:
            problem = _undecodable(path, from_start(), form.encoding)
            if problem is None and ragged:
                line, cells = ragged[0]
                problem = MalformedSourceError(
                    f"{path}: line {line}: {cells} cell(s), but the header has {len(header)} "
                    f"columns (cells separated by {_shown(form.delimiter)!r}; --delimiter names "
                    "another)")
            reason = " ".join(str(error).split())
            raise problem or MalformedSourceError(
                f"{path}: not a readable CSV file ({reason})") from None
        except OSError as error:
            raise MalformedSourceError(
                f"{path}: cannot be read ({error.strerror or error})") from None

    return header, read, stream.close


@dataclass(frozen=True)
class Column:
    """One column of a file: how its cells are read and what they must be."""

    name: str
    cells: CellKind = "text"
    """``id``: printable text (no character :data:`UNPRINTABLE` names); ``text``;
    ``number``: float64, checked against ``bound``; ``time``: read by the reader's own
    :class:`~tasks.ingest.timestamps.TimeReader`, not judged here."""
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

    def checked_numbers(self, values: pa.Array | pa.ChunkedArray, at: SourceRows, *,
                        policy: ImplausiblePolicy, tally: Tally, scale: float = 1.0,
                        column: str | None = None) -> pa.Array | pa.ChunkedArray:
        """``values`` (the file's numbers, as read) checked against ``bound`` (compared after
        ``scale``), an implausible one refused or made missing by ``policy`` and counted in
        ``tally``; ``column`` names the file's column (default: this one)."""
        if self.bound is None:
            return values
        return check_column(values, self.bound, path=at.path, column=column or self.name,
                            lines=at.lines(np.arange(len(values))), policy=policy, tally=tally,
                            scale=scale, label=at.row_label)


@dataclass(frozen=True)
class Cells:
    """A file's judged values by column (in :attr:`values` an id column dictionary-encoded, a
    number column as the chunks it was read in; an optional column the file lacks: all
    missing), its time columns as its reader read them, the blank cells of each number column
    as read, and the values :attr:`tally` changed."""

    at: SourceRows
    columns: list[str]
    values: dict[str, pa.Array | pa.ChunkedArray]
    rows: int
    times: dict[str, pd.Series] = field(default_factory=dict)
    blank: dict[str, int] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)

    def __getitem__(self, name: str) -> pa.Array | pa.ChunkedArray:
        values = self.values[name]
        return values.dictionary_decode() if pa.types.is_dictionary(values.type) else values

    def strings(self, name: str) -> pd.Series:
        """A text or id column as a Series of ``str`` (missing: ``None``)."""
        return pd.Series(self[name].to_pylist(), dtype=object)


def _unprintable(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a ``what`` (e.g. ``building id``), or ``None`` when it can."""
    found = re.search(UNPRINTABLE, value)
    if found is None:
        return None
    char = found.group()
    name = unicodedata.name(char, "a control character").lower()
    return (f"{what} {value!r} holds U+{ord(char):04X} ({name}) at character "
            f"{found.start() + 1}: ids are printable text, with no control or text-direction "
            "characters; fix the id")


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

    unprintable = pc.fill_null(pc.match_substring_regex(ids, UNPRINTABLE), False)
    if pc.any(unprintable).as_py():
        bad = int(np.flatnonzero(unprintable.to_numpy(zero_copy_only=False))[0])
        raise at.error(first_row(bad), column.name,
                       _unprintable(ids[bad].as_py(), column.what or column.name))
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
        return [name for name in columns if name not in (*self.required, *self.optional)]

    def column(self, name: str) -> Column:
        return next(column for column in self.columns if column.name == name)

    def requiring(self, *names: str) -> FileContract:
        """This contract with the columns ``names`` required."""
        return replace(self, columns=tuple(replace(c, required=True) if c.name in names else c
                                           for c in self.columns))

    def value_column(self, name: str, columns: list[str]) -> str | None:
        """The file's name of the column ``name``: itself or the one of its aliases present
        (``None``: neither)."""
        return next((n for n in (name, *self.column(name).aliases) if n in columns), None)

    def open(self, path: str | Path, form: CsvFormat | None = None) -> SourceFile:
        """``path`` opened (:func:`open_file`), its header checked against the columns (read
        through ``form``'s column mapping when it is a :class:`FileOptions`)."""
        mapping = form.column_mapping() if isinstance(form, FileOptions) else None
        self._check_targets(Path(path), mapping)  # before the file is opened
        source = open_file(path, form, mapping)
        try:
            self.check_header(source)
        except MalformedSourceError:
            source.close()
            raise
        return source

    def read(self, path: str | Path, form: CsvFormat | None = None, *,
             policy: ImplausiblePolicy = "refuse") -> Cells:
        """The whole of ``path`` opened (:meth:`open`) and judged (:meth:`judge`)."""
        return self.judge(self.open(path, form), policy=policy)

    def _check_targets(self, path: Path, mapping: ColumnMapping | None) -> None:
        """The mapping names only the contract's columns (any, for a file of :attr:`others`),
        else an error naming the source and the target."""
        allowed = (*self.required, *self.optional)
        for pair in mapping.pairs if mapping and self.others is None else ():
            if pair.target is not None and pair.target not in allowed:
                raise MalformedSourceError(
                    f"{path}: {pair.origin} maps column {pair.source!r} to {pair.target!r}, "
                    f"which is not a column of {self.what}; the columns are {', '.join(allowed)}")

    def check_header(self, source: SourceFile) -> None:
        """The header of an open file (its columns as the mapping reads them) against the
        contract: every required column there; no unexpected one (at least one, each named by
        a printable id, with :attr:`others`); exactly one name of a column with aliases."""
        path, columns, mapping = source.at.path, source.columns, source.mapping
        self._check_targets(path, mapping)
        missing = [name for name in self.required if name not in columns]
        if missing:
            raise MalformedSourceError(
                f"{path}: missing required column(s) {', '.join(map(repr, missing))}; "
                f"found {columns}" + ("" if mapping else
                                      "; --columns 'NAME=TARGET' reads a column under another "
                                      "name"))
        unexpected = self.other_columns(columns)
        if unexpected and self.others is None:
            optional = f" and optionally {', '.join(sorted(set(self.optional)))}"
            raise MalformedSourceError(
                f"{path}: unexpected column(s) {', '.join(map(repr, unexpected))}; the columns "
                f"are {', '.join(self.required)}{optional if self.optional else ''}; --columns "
                f"'{unexpected[0]}=TARGET' reads it as another column, --columns "
                f"'{unexpected[0]}=' leaves it out")
        for column in self.columns:
            present = [n for n in (column.name, *column.aliases) if n in columns]
            if column.aliases and len(present) != 1 and (column.required or present):
                names = " or ".join(map(repr, (column.name, *column.aliases)))
                raise MalformedSourceError(
                    f"{path}: {self.what} needs exactly one {column.name} column, {names}; "
                    f"found {columns}")
        if self.others is not None:
            if not unexpected:
                raise MalformedSourceError(
                    f"{path}: {self.what} needs {', '.join(self.required)} and one column per "
                    f"{self.others.what}; found only {columns}")
            for position, name in enumerate(columns, start=1):
                problem = _unprintable(name, self.others.what)
                if problem is not None:
                    raise MalformedSourceError(
                        f"{path}: column {position} of the header: {problem}")

    def judge(self, source: SourceFile, *, policy: ImplausiblePolicy = "refuse",
              scale: Mapping[str, float] | None = None,
              times: Mapping[str, Callable[[SourceTable], pd.Series]] | None = None,
              bounds: bool = True) -> Cells:
        """Every column of ``source`` as values, read a chunk at a time (the file closed then),
        then the key checked; the first bad cell is refused naming its line and column (an
        implausible number is made missing instead under ``policy="missing"``, and counted;
        with ``bounds=False`` numbers are left for the reader to check). ``scale`` multiplies
        a number column's cells into the column's unit (a feed's wind in knots): they are
        checked in that unit, a refusal quoting the file's value and then the converted one.
        ``times`` reads a time column's chunk (first, in each chunk); a time column
        it does not name is kept as read. A file without data rows is refused."""
        times = times or {}
        plan = [(c.name, c, self.value_column(c.name, source.columns)) for c in self.columns]
        if self.others is not None:
            plan += [(name, self.others, name) for name in self.other_columns(source.columns)]
        read = sorted((p for p in plan if p[2] is not None), key=lambda p: p[0] not in times)
        parts: dict[str, list] = {key: [] for key, _, _ in read}
        blank = {key: 0 for key, column, _ in read if column.cells == "number"}
        rows, tally = 0, Tally()
        with source:
            for chunk in source.chunks():
                rows += chunk.rows
                for key, column, name in read:
                    at = chunk.at
                    if key in times:
                        values = times[key](chunk)
                    elif column.cells == "time":
                        values = chunk.table[name].combine_chunks()
                    elif column.cells == "id":
                        values = checked_ids(at, column, chunk.trimmed(name))
                    elif column.cells == "text":
                        values = chunk.trimmed(name).combine_chunks()
                        if column.filled:
                            at.refuse_blank(name, values)
                    else:
                        values = chunk.numbers(name)
                        blank[key] += values.null_count
                        if column.filled:
                            at.refuse_blank(name, values)
                        factor = scale.get(key, 1.0) if scale else 1.0
                        if bounds:  # a refusal quotes the file's value, then the converted one
                            values = column.checked_numbers(values, at, policy=policy,
                                                            tally=tally, column=name,
                                                            scale=factor)
                        if factor != 1.0:
                            values = pc.multiply(values, pa.scalar(factor, pa.float64()))
                    parts[key].append(values)
        if rows == 0:
            raise MalformedSourceError(f"{source.at.path}: empty file, a header but no data rows")
        cells = Cells(source.at, source.columns, {}, rows, blank=blank, tally=tally)
        for key, column, name in plan:
            if key in times:
                cells.times[key] = pd.concat(parts.pop(key), ignore_index=True)
            elif column.cells == "number" and name is not None:  # its chunks, as read
                cells.values[key] = pa.chunked_array(parts.pop(key), pa.float64())
            elif name is not None:
                chunks = pa.chunked_array(parts.pop(key))
                cells.values[key] = (chunks.unify_dictionaries() if column.cells == "id"
                                     else chunks).combine_chunks()
            elif column.cells != "time":
                cells.values[key] = pa.nulls(cells.rows, pa.float64() if column.cells ==
                                             "number" else pa.string())
        self._check_key(cells)
        return cells

    def _check_key(self, cells: Cells) -> None:
        if not self.key:
            return
        keys = pd.DataFrame({name: cells[name].to_pandas() for name in self.key})
        repeated = keys.duplicated().to_numpy()
        if not repeated.any():
            return
        second = int(repeated.argmax())
        row = keys.iloc[second]
        first = int((keys == row).all(axis=1).to_numpy().argmax())
        said = self.repeated.format(**row.to_dict())
        raise cells.at.error(second, self.key[-1],
                             f"{said} ({cells.at.where(first)} and {cells.at.where(second)})")

"""A CSV file opened and read from disk once, for every pass that needs its bytes.

Reading an operator's CSV takes up to three passes over its bytes: the csv module reads the
header (and, for a one-column header, the second line), pyarrow parses the rows, and a file
pyarrow refuses is scanned for the line to name (one that is not text of its encoding, or one
with more or fewer cells than the header). :class:`CsvBytes` opens the file once and gives each
pass the same bytes:

* a file of at most ``whole_bytes`` (a block of pyarrow's reader) is read at once, and every
  pass reads that buffer;
* a larger one streams: the bytes read for the header are kept and handed to pyarrow
  (:meth:`CsvBytes.read`) before the rest of the file, so a file that is read in is read from
  disk once, a block at a time. Only the scan of such a file that pyarrow refuses reads it
  again, from the same opening (:meth:`CsvBytes.from_start`), in one pass.

The header is decoded as a text file opened with that encoding decodes it, a chunk of
:data:`TEXT_CHUNK` bytes at a time: a byte that is not text in the header's first chunk is
met, as it would be reading the header from disk.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import os
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

__all__ = ["TEXT_CHUNK", "CsvBytes", "Undecodable", "first_problem"]

TEXT_CHUNK = 8192
"""How many bytes a text file (``io.TextIOWrapper``) decodes at a time."""
HEAD_BYTES = 8 * TEXT_CHUNK
"""How much of a file that streams is read first, for its header (more if the header is
longer)."""


class CsvBytes:
    """A CSV file opened once (see the module). :meth:`records` reads its first records,
    :meth:`stream` gives its bytes to pyarrow once, :meth:`from_start` to the scan of a file
    pyarrow refused; :meth:`close` (or the object's end) closes the file."""

    def __init__(self, path: Path, whole_bytes: int) -> None:
        self.path = path
        self._file = path.open("rb")
        self._closing = weakref.finalize(self, self._file.close)
        self._lock = threading.Lock()
        self._stopped = self._started = False
        whole = os.fstat(self._file.fileno()).st_size <= whole_bytes
        self.head = self._file.read(-1 if whole else HEAD_BYTES)
        """The file's first bytes (all of them once :attr:`complete`)."""
        self.complete = whole or len(self.head) < HEAD_BYTES
        if self.complete:
            self.close()

    def records(self, count: int, encoding: str, errors: str, delimiter: str) -> list[list[str]]:
        """The first ``count`` records as the csv module reads them from the file opened as
        text (``encoding``, ``errors``, ``newline=""``); a decoding or csv error is raised as it
        would be reading the file."""
        while True:
            head = io.BytesIO(self.head)
            text = io.TextIOWrapper(head, encoding=encoding, errors=errors, newline="")
            try:
                rows = list(itertools.islice(csv.reader(text, delimiter=delimiter), count))
            except (UnicodeDecodeError, csv.Error):
                if self._known(head):
                    raise
            else:
                if self._known(head):
                    return rows
            self._read_more()

    def _known(self, head: io.BytesIO) -> bool:
        """Whether what the text read from ``head`` gave is what the file gives: the head
        is the whole file, or the reading stopped before its end."""
        return self.complete or head.tell() < len(self.head)

    def _read_more(self) -> None:
        wanted = len(self.head)
        more = self._file.read(wanted)
        self.head += more
        self.complete = len(more) < wanted
        if self.complete:
            self.close()

    def stream(self) -> pa.NativeFile | CsvBytes:
        """The file's bytes for pyarrow (once): the buffer of a file read at once, else this
        object, whose :meth:`read` gives the head, then the rest of the file."""
        if self._started:
            raise RuntimeError(f"{self.path} is read once; open it again to read it again")
        self._started = True
        if self.complete:
            return pa.BufferReader(self.head)
        return self

    @property
    def closed(self) -> bool:
        """False while pyarrow may read (pyarrow asks a Python stream)."""
        return self._stopped

    def read(self, size: int = -1) -> bytes | bytearray:
        """The next ``size`` bytes (all that are left with ``size < 0``), as pyarrow reads a
        stream: the head read for the header first, then the file."""
        with self._lock:
            if self._stopped:
                return b""
            head, self.head = self.head, b""
            if not head:
                return self._file.read(size)
            if size < 0:
                return head + self._file.read()
            if len(head) >= size:
                self.head = head[size:]
                return head[:size]
            block = bytearray(size)  # the head and the file's next bytes, in one buffer
            block[:len(head)] = head
            rest = memoryview(block)[len(head):]
            got = self._file.readinto(rest)
            rest.release()
            del block[len(head) + got:]
            return block

    def from_start(self) -> BinaryIO:
        """The file's bytes from its start, for the scan of a file pyarrow refused (pyarrow
        reads no more): the buffer, or the same opening of the file again."""
        if self.complete:
            return io.BytesIO(self.head)
        with self._lock:
            self._stopped = True
            self._file.seek(0)
        return self._file

    def close(self) -> None:
        """Close the file (pyarrow reads no more)."""
        with self._lock:
            self._stopped = True
            self._closing()


@dataclass(frozen=True)
class Undecodable:
    """The first line that is not text of the encoding: its number (from 1), the byte there
    and the character (from 1) it starts at."""

    line: int
    byte: int
    character: int


class _Decoding(io.RawIOBase):
    """Bytes passed on while each line (up to a ``\\n``) is decoded as ``encoding``, one after
    the other, as a file read line by line is; after the first line that is not such text the
    bytes end, and :attr:`problem` names it."""

    def __init__(self, raw: BinaryIO, encoding: str) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder(encoding)()
        self._parts: list[bytes] = []
        self._number = 0
        self.problem: Undecodable | None = None

    def readable(self) -> bool:
        return True

    def close(self) -> None:  # the file is closed by its owner
        pass

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.problem is not None:
            return 0
        data = self._raw.read(len(buffer))
        start = 0
        while self.problem is None and (end := data.find(b"\n", start)) >= 0:
            self._decode(b"".join([*self._parts, data[start:end + 1]]))
            self._parts, start = [], end + 1
        if start < len(data):
            self._parts.append(data[start:])
        if not data and self._parts:  # the last line, without a newline
            self._decode(b"".join(self._parts))
            self._parts = []
        buffer[:len(data)] = data
        return len(data)

    def _decode(self, line: bytes) -> None:
        self._number += 1
        try:
            self._decoder.decode(line)
        except UnicodeDecodeError as error:
            self.problem = Undecodable(self._number, line[error.start], error.start + 1)

    def finish(self) -> Undecodable | None:
        """Read the rest; the first line that is not text, if any."""
        buffer = bytearray(1 << 20)
        while self.readinto(memoryview(buffer)):
            pass
        return self.problem


def first_problem(raw: BinaryIO, encoding: str, delimiter: str, width: int | None
                  ) -> tuple[Undecodable | None, tuple[int, int] | None]:
    """In one pass over a CSV's bytes ``raw``: its first line that is not ``encoding`` text,
    and (with ``width``, the header's number of cells) the line number and number of cells of
    its first record after the header with another number of cells (read as text with
    undecodable bytes replaced). A csv error is raised when no line is undecodable."""
    decoding = _Decoding(raw, encoding)
    ragged = None
    if width is not None:
        text = io.TextIOWrapper(io.BufferedReader(decoding), encoding=encoding,
                                errors="replace", newline="")
        reader = csv.reader(text, delimiter=delimiter)
        try:
            next(reader, None)
            ragged = next(((reader.line_num, len(cells)) for cells in reader
                           if len(cells) != width), None)
        except csv.Error:
            if decoding.finish() is None:
                raise
    return decoding.finish(), ragged

"""Every operator file is read from disk once: the header, the parse and, for a refused file,
the scan naming its line all read one opening of the file (issue 32).

Counted by the operating system, whatever opens the file (Python or pyarrow's C++): the
kernel's inotify reports each opening of the path, and ``/proc/self/io`` counts the bytes the
process reads, which must not exceed the file's size by more than the process's own small
reads around it (each loader is run once on another file first, so that what it imports or
caches on a first call is read then)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.ingest import contract
from tasks.ingest.buildings_file import load_buildings
from tasks.ingest.errors import MalformedSourceError
from tasks.ingest.readings_file import load_readings
from tasks.ingest.weather_file import WeatherOptions, load_weather
from tests.tasks.ingest.operator_files import BUILDINGS_CSV, write

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/io").exists(),
    reason="counts openings with inotify and bytes read with /proc/self/io (Linux)")

_IN_ACCESS, _IN_OPEN, _IN_CLOSE = 0x1, 0x20, 0x8 | 0x10
_SLACK = 64 << 10
"""Bytes the process may read besides the file during a load (far less than the files)."""


@dataclass
class Reads:
    opens: int = 0
    bytes_read: int = 0


def _bytes_read() -> int:
    """What this process has read so far (``rchar``: every read system call's bytes)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"])


@contextmanager
def watched(path: Path) -> Iterator[Reads]:
    """How often ``path`` is opened (inotify), and how many bytes the process reads, inside."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    # every read and close is watched too, so that two openings never fold into one event
    assert libc.inotify_add_watch(fd, bytes(path), _IN_OPEN | _IN_ACCESS | _IN_CLOSE) >= 0
    reads = Reads()
    try:
        before = _bytes_read()
        yield reads
        reads.bytes_read = _bytes_read() - before
        events = b""
        while True:
            try:
                events += os.read(fd, 1 << 16)
            except BlockingIOError:
                break
    finally:
        os.close(fd)
    at = 0
    while at < len(events):
        _, mask, _, length = struct.unpack_from("iIII", events, at)
        reads.opens += bool(mask & _IN_OPEN)
        at += 16 + length


def read_once(load: Callable[[Path], object], path: Path, warm_up: Path) -> object:
    """``load(path)`` (its result, or the error it raised), once it is seen to open ``path``
    once and read no more bytes than the file holds."""
    try:
        load(warm_up)
    except MalformedSourceError:
        pass
    with watched(path) as reads:
        try:
            result = load(path)
        except MalformedSourceError as error:
            result = error
    size = path.stat().st_size
    assert reads.opens == 1
    assert size <= reads.bytes_read <= size + _SLACK, (reads.bytes_read, size)
    return result


def _long_readings(path: Path, buildings: int, hours: int, ragged_at: int | None = None) -> Path:
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    stamps = [f"{start - timedelta(hours=h):%Y-%m-%dT%H:%M:%SZ}" for h in range(hours, 0, -1)]
    energies = np.random.default_rng(7).uniform(0, 50, buildings * hours)
    lines = [f"b{b},{stamp},{energies[b * hours + h]:.3f}"
             for b in range(buildings) for h, stamp in enumerate(stamps)]
    if ragged_at is not None:
        lines[ragged_at] += ",1"
    return write(path, "building_id,ts,kwh\n" + "\n".join(lines) + "\n")


def test_a_meter_export_streamed_in_blocks_is_read_once(tmp_path, monkeypatch):
    """Larger than a block: streamed, the header's bytes handed on to the parse."""
    monkeypatch.setattr(contract, "CHUNK_BYTES", 128 << 10)
    path = _long_readings(tmp_path / "r.csv", 40, 24 * 28)  # about 850 kB, 27,000 rows
    assert path.stat().st_size > 4 * contract.CHUNK_BYTES
    warm_up = _long_readings(tmp_path / "w.csv", 1, 24)
    batch = read_once(load_readings, path, warm_up)
    assert batch.rows_read == 40 * 24 * 28 and len(batch.building_ids) == 40


def test_a_refused_meter_export_is_read_once_to_name_its_line(tmp_path):
    """pyarrow refuses a ragged line near the end: the line is found in the bytes read."""
    path = _long_readings(tmp_path / "r.csv", 40, 24 * 28, ragged_at=40 * 24 * 28 - 3)
    warm_up = _long_readings(tmp_path / "w.csv", 1, 24)
    error = read_once(load_readings, path, warm_up)
    last_line = 40 * 24 * 28 + 1
    assert str(error) == (f"{path}: line {last_line - 2}: 4 cell(s), but the header has 3 "
                          "columns (cells separated by ','; --delimiter names another)")


def test_a_file_that_is_not_utf8_is_read_once_to_name_its_line(tmp_path):
    path = _long_readings(tmp_path / "r.csv", 20, 24 * 28)
    text = path.read_bytes()
    cut = text.rindex(b"\nb19,")
    path.write_bytes(text[:cut + 1] + b"b\xe919" + text[cut + 4:])
    error = read_once(load_readings, path, _long_readings(tmp_path / "w.csv", 1, 24))
    assert str(error).startswith(f"{path}: line {20 * 24 * 28 + 1} is not utf-8 text "
                                 "(byte 0xe9 at character 2)")


def test_a_parquet_meter_export_is_opened_once(tmp_path):
    csv = _long_readings(tmp_path / "r.csv", 40, 24 * 28)
    path = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pandas(pd.read_csv(csv, dtype=str)), path)
    warm_up = tmp_path / "w.parquet"
    pq.write_table(pa.Table.from_pandas(pd.read_csv(_long_readings(tmp_path / "w.csv", 1, 24),
                                                    dtype=str)), warm_up)
    with watched(path) as reads:
        batch = load_readings(path)
    assert reads.opens == 1
    assert batch.rows_read == 40 * 24 * 28


def _weather(path: Path, sites: int, hours: int) -> Path:
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    lines = [f"s{s},{start - timedelta(hours=h):%Y-%m-%dT%H:%M:%SZ},{h % 30 - 5}.5,{h % 900},"
             f"{h % 12}.25" for s in range(sites) for h in range(hours, 0, -1)]
    return write(path, "site_id,ts,temperature_c,irradiance_wm2,wind_speed_ms\n"
                 + "\n".join(lines) + "\n")


def test_a_weather_feed_is_read_once(tmp_path):
    path = _weather(tmp_path / "w.csv", 30, 24 * 28)
    options = WeatherOptions(kind="observed")
    batch = read_once(lambda p: load_weather(p, options), path, _weather(tmp_path / "x.csv", 1, 3))
    assert batch.rows_read == 30 * 24 * 28 and len(batch.site_ids) == 30


def test_a_buildings_file_is_read_once(tmp_path):
    rows = BUILDINGS_CSV.splitlines()
    many = [rows[0]] + [f"b{i},s{i % 7},Europe/London,GB,ENG,office" for i in range(20_000)]
    path = write(tmp_path / "b.csv", "\n".join(many) + "\n")
    batch = read_once(load_buildings, path, write(tmp_path / "w.csv", BUILDINGS_CSV))
    assert batch.buildings.num_rows == 20_000

"""A week's published forecasts, or its portfolio forecasts, as one file for an operator's
systems (``wadiro export``): CSV or Parquet, hourly or per settlement period.

Each row is one period of one building (or portfolio): ``period_start`` is its local start in
ISO 8601 with the UTC offset (``2024-03-31T03:00:00+01:00``), ``period_start_utc`` the same
instant in UTC (a timestamp in Parquet, ``...Z`` text in CSV), ``local_time`` the local wall
clock (``2024-03-31 03:00``), then the ``timezone`` and the period's length in ``minutes``.
A week is the building's local Monday 00:00 to the next: 168 hours, 167 or 169 across a clock
change (336, 334 or 338 half-hours).

**Settlement periods** (``resolution`` 30 or 15 minutes): an hour's forecast is split by the
building's own intra-hour shape where its readings came sub-hourly
(:func:`~tasks.warehouse.intra_hour.period_shares`), evenly otherwise. A period
gets its share of the hour's forecast, and the same share of the hour's interval bounds: the
periods of an hour sum to the hour's forecast and to its bounds (to rounding), so the period
bounds are the hour's band split by the shape, not separately calibrated intervals of each
period. A portfolio's hour is split as the sum of its buildings' split forecasts.

CSV (RFC 4180: CRLF line ends) text cells that a spreadsheet would run as a formula get a
leading ``'``
(:mod:`~tasks.outputs.output_files`); the file is written beside its name and
renamed onto it, so a half-written file is never left under the name.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import BinaryIO
from zoneinfo import ZoneInfo

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.errors import PipelineError
from tasks.outputs.output_files import OUTPUT_MEMORY, csv_text, open_beside
from tasks.protocol.intervals import LEVELS
from tasks.warehouse.connection import connect
from tasks.warehouse.intra_hour import RESOLUTIONS, period_shares
from tasks.warehouse.portfolio_sql import (
    checked_portfolio_ids,
    read_portfolio_forecasts,
    stored_members_sql,
)
from tasks.warehouse.selection import fleet_building_ids, fleet_timezone, shown_ids

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""File extensions written, and as what."""

BOUNDS = tuple(f"y_{side}_{round(100 * level)}" for level in LEVELS for side in ("lo", "hi"))
VALUES = ("y_hat", *BOUNDS)
"""The columns split over an hour's periods."""


class ExportError(PipelineError, ValueError):
    """An export that cannot be made: nothing published, an unknown portfolio, a bad file."""


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote."""

    path: Path
    rows: int
    kind: str
    """``building`` or ``portfolio``."""
    ids: int
    week: date
    minutes: int

    def line(self) -> str:
        return (f"wrote {self.rows:,} rows ({self.ids:,} {self.kind}(s), week of {self.week}, "
                f"{self.minutes}-minute periods) to {self.path}")


def split_hours(hours: pd.DataFrame, shares: np.ndarray, minutes: int) -> pd.DataFrame:
    """Each hour of ``hours`` (``ts`` its UTC start, the value columns :data:`VALUES`) split
    into ``minutes``-long periods: one row per period, ``ts`` its start, every value column
    times the period's share, ``shares[i]`` (one per period, summing to 1) for row ``i``."""
    periods = 60 // minutes
    if periods == 1:
        return hours.reset_index(drop=True)
    n = len(hours)
    out = hours.iloc[np.repeat(np.arange(n), periods)].reset_index(drop=True)
    out["ts"] = out["ts"] + pd.to_timedelta(np.tile(np.arange(periods) * minutes, n), unit="min")
    flat = np.asarray(shares, dtype=np.float64).reshape(-1)
    for column in VALUES:
        out[column] = out[column].to_numpy(np.float64) * flat
    return out


def _share_columns(minutes: int) -> list[str]:
    return [f"share_{j}" for j in range(60 // minutes)]


def _iso_local(ts: pd.Series, zone: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the local start with its UTC offset (ISO 8601) and the local wall clock, made
    from the local clock's numbers (what ``strftime`` writes, without its per-row cost)."""
    iso = np.empty(len(ts), dtype=object)
    wall = np.empty(len(ts), dtype=object)
    utc = ts.dt.tz_localize(None).to_numpy("datetime64[s]")
    for tz, rows in pd.Series(np.arange(len(ts))).groupby(zone.to_numpy()):
        at = rows.to_numpy()
        local = ts.iloc[at].dt.tz_convert(str(tz)).dt.tz_localize(None).to_numpy("datetime64[s]")
        offset = (local - utc[at]).astype("timedelta64[m]").astype(np.int64)
        text = {m: f"{'-' if m < 0 else '+'}{abs(m) // 60:02d}:{abs(m) % 60:02d}"
                for m in np.unique(offset)}
        iso[at] = np.char.add(np.datetime_as_string(local, unit="s"),
                              pd.Series(offset).map(text).to_numpy(str))
        wall[at] = np.char.replace(np.datetime_as_string(local, unit="m"), "T", " ")
    return iso, wall


GB_SETTLEMENT_ZONE = "Europe/London"
"""GB settlement days are the local days of this zone: 48 half-hour periods, 46 on the day the
clocks go forward, 50 on the day they go back."""


def gb_settlement_periods(ts: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Each half-hour's GB settlement date and period (1 from local midnight, counted in real
    time: 46 on the spring clock-change day, 50 in autumn), from its UTC start ``ts``."""
    local = ts.dt.tz_convert(GB_SETTLEMENT_ZONE)
    midnight = local.dt.normalize()  # London never skips or repeats midnight (1-2 am changes)
    period = (ts - midnight.dt.tz_convert("UTC")) // pd.Timedelta(minutes=30) + 1
    return local.dt.date, period.astype("int64")


def _frame(rows: pd.DataFrame, key: str, minutes: int, extra: Sequence[str]) -> pd.DataFrame:
    """The file's rows (``rows``: ``key``, ``target_week``, ``ts``, ``timezone``, ``extra``,
    :data:`VALUES`) in their columns and order; 30-minute periods carry their GB settlement
    date and period."""
    rows = rows.sort_values(["key", "ts"], kind="stable").reset_index(drop=True)
    ts = rows["ts"].dt.tz_convert("UTC")
    iso, wall = _iso_local(ts, rows["timezone"])
    settlement = {}
    if minutes == 30:
        settlement["settlement_date"], settlement["settlement_period"] = gb_settlement_periods(ts)
    return pd.DataFrame({
        key: rows["key"], "target_week": pd.to_datetime(rows["target_week"]).dt.date,
        "period_start": iso, "period_start_utc": ts, "local_time": wall, **settlement,
        "timezone": rows["timezone"], "minutes": minutes,
        **{c: rows[c] for c in extra}, **{c: rows[c] for c in VALUES},
    })


def latest_week(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None,
                as_of: datetime | None = None) -> date:
    """The latest week with a published forecast (of ``buildings``, or of any building;
    issued at or before ``as_of`` when given)."""
    where = ["building_id IN (SELECT unnest(?::VARCHAR[]))"] if buildings is not None else []
    params: list = [] if buildings is None else [list(buildings)]
    table = "publications"
    if as_of is not None:
        table = "issued_forecasts"
        where.append("issued_at <= ?")
        params.append(as_of)
    condition = f"WHERE {' AND '.join(where)}" if where else ""
    week = con.execute(f"SELECT max(target_week) FROM {table} {condition}", params).fetchone()[0]
    if week is None:
        issued = f" by {as_of:%Y-%m-%d %H:%M %Z}" if as_of is not None else " yet"
        raise ExportError(f"nothing is published{issued}; run `wadiro forecast` first")
    return week


def _published(as_of: datetime | None) -> tuple[str, list]:
    """The published forecasts' source and its parameters: the latest vintage, or the one
    issued at ``as_of`` (the macro ``published_as_of``)."""
    if as_of is None:
        return "published_forecasts", []
    return "published_as_of(?::TIMESTAMPTZ)", [as_of]


def _building_hours(con: duckdb.DuckDBPyConnection, buildings: Sequence[str] | None,
                    week: date, portfolios: Sequence[str] | None = None,
                    as_of: datetime | None = None) -> duckdb.DuckDBPyConnection:
    """The published hours of ``week`` (as issued at ``as_of``, when given): of
    ``buildings``, by building and hour, or of the members of ``portfolios`` (one row per
    portfolio and member hour, ``portfolio_id`` beside); the executed query, to be fetched."""
    if portfolios is None:
        members, member = "", "building_id IN (SELECT unnest(?::VARCHAR[]))"
        params: list = [week, list(buildings or [])]
    else:  # only the chosen portfolios' members are read
        members = f"JOIN ({stored_members_sql(con, chosen=True)}) m USING (building_id)"
        member = "true"
        params = [list(portfolios), week]
    portfolio = ", m.portfolio_id" if portfolios is not None else ""
    source, source_params = _published(as_of)
    order = "ORDER BY p.building_id, p.ts" if portfolios is None else ""
    return con.execute(
        f"""SELECT p.building_id, p.target_week, p.ts, p.model, b.timezone{portfolio},
                   hour(timezone(b.timezone, p.ts)) AS local_hour, {', '.join(VALUES)}
            FROM {source} p JOIN buildings b USING (building_id) {members}
            WHERE p.target_week = ? AND {member} {order}""", source_params + params)


def _building_shares(con: duckdb.DuckDBPyConnection, hours: pd.DataFrame,
                     minutes: int) -> np.ndarray:
    """Each hour's period shares: its building's shape at its local hour."""
    columns = _share_columns(minutes)
    shares = period_shares(con, sorted(hours["building_id"].unique()), minutes)
    return hours[["building_id", "local_hour"]].merge(
        shares, on=["building_id", "local_hour"], how="left")[columns].to_numpy(np.float64)


def _building_rows(con: duckdb.DuckDBPyConnection, buildings: Sequence[str], week: date,
                   minutes: int, as_of: datetime | None = None) -> Iterator[pd.DataFrame]:
    """The file's rows, :data:`EXPORT_CHUNK` buildings at a time, from one query read as it
    comes (a query per chunk would read the week's forecasts once per chunk)."""
    shapes = con.cursor()  # the shares are read while the hours stream
    result, held, done = _building_hours(con, buildings, week, as_of=as_of), None, False
    while not done:
        part = result.fetch_df_chunk(EXPORT_CHUNK * 168 // 2048 + 1)
        done = part.empty
        if held is None or not done:  # (a concat with an empty frame may change dtypes)
            held = part if held is None else pd.concat([held, part], ignore_index=True)
        ids = held["building_id"].to_numpy()
        others = np.flatnonzero(ids != ids[-1]) if len(ids) else []
        # the buildings held that are complete: all at the end, else all but the last
        cut = len(ids) if done else int(others[-1]) + 1 if len(others) else 0
        if cut and (done or cut >= EXPORT_CHUNK * 168):
            hours, held = held.iloc[:cut].reset_index(drop=True), held.iloc[cut:]
            shares = _building_shares(shapes, hours, minutes)
            yield _frame(split_hours(hours.rename(columns={"building_id": "key"}), shares,
                                     minutes), "building_id", minutes, ["model"])


def _portfolio_rows(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str], week: date,
                    minutes: int) -> pd.DataFrame:
    """A portfolio hour is split as the sum of its buildings' split forecasts: its shares are
    theirs weighted by their forecasts (evenly where the hour's forecast is 0)."""
    hours = read_portfolio_forecasts(con, portfolios, [week]).rename(
        columns={"portfolio_id": "key"})
    zones = con.execute(
        f"""SELECT m.portfolio_id AS key, mode(b.timezone ORDER BY b.timezone) AS timezone
            FROM ({stored_members_sql(con, chosen=True)}) m JOIN buildings b USING (building_id)
            GROUP BY ALL""", [list(portfolios)]).df()
    hours = hours.merge(zones, on="key")
    columns = _share_columns(minutes)
    if len(columns) > 1:
        members = _building_hours(con, None, week, portfolios).df()
        members = members[members["y_hat"].notna()].reset_index(drop=True)
        weighted = pd.DataFrame(_building_shares(con, members, minutes) *
                                members[["y_hat"]].to_numpy(), columns=columns)
        weighted[["key", "ts"]] = members[["portfolio_id", "ts"]]
        summed = weighted.groupby(["key", "ts"], as_index=False)[columns].sum()
        hours = hours.merge(summed, on=["key", "ts"], how="left")
        total = hours[columns].sum(axis=1).to_numpy()
        shares = hours[columns].to_numpy(np.float64)
        shares = np.where((total > 0)[:, None], shares / np.where(total > 0, total, 1.0)[:, None],
                          1.0 / len(columns))
    else:
        shares = np.ones((len(hours), 1))
    return _frame(split_hours(hours, shares, minutes), "portfolio_id", minutes,
                  ["n_buildings", "n_buildings_expected"])


EXPORT_CHUNK = 500
"""Buildings or portfolios whose rows are made and written at a time: an export's memory is that
of a chunk (a Parquet file's: of a row group, :data:`ROW_GROUP` rows), not of the file."""

ROW_GROUP = 1024 * 1024
"""Rows of a Parquet row group: pyarrow's default, so the file written chunk by chunk is the
bytes ``pyarrow.parquet.write_table`` writes of the whole."""


def _write_csv(stream: BinaryIO, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for n, frame in enumerate(frames):
        stream.write(csv_text(frame.assign(
            period_start_utc=np.char.add(np.datetime_as_string(frame["period_start_utc"].dt
                                                               .tz_localize(None), "s"), "Z"),
            target_week=frame["target_week"].astype(str)), header=n == 0).encode("utf-8"))
        yield frame


def _write_parquet(stream: BinaryIO, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The frames as one Parquet file, in row groups of :data:`ROW_GROUP` rows."""
    writer, held = None, []
    for frame in frames:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        writer = writer or pq.ParquetWriter(stream, table.schema)
        held.append(table.cast(writer.schema))
        while sum(len(t) for t in held) >= ROW_GROUP:
            rows = pa.concat_tables(held)
            writer.write_table(rows.slice(0, ROW_GROUP).combine_chunks())
            held = [rows.slice(ROW_GROUP)]
        yield frame
    if writer is not None:
        if any(len(t) for t in held):
            writer.write_table(pa.concat_tables(held).combine_chunks())
        writer.close()


def _check_monday(week: date) -> None:
    """A week is named by its local Monday: another day is refused naming that Monday, not
    searched for and found empty."""
    if week.weekday() != 0:
        monday = week - timedelta(days=week.weekday())
        raise ExportError(f"--week {week} is a {week:%A}, not a Monday: a week is given by its "
                          f"local Monday; the week holding {week} is --week {monday}")


def _written(out: Path, kind: str, frames: Iterator[pd.DataFrame],
             nothing: str) -> tuple[int, int]:
    """``frames`` written as ``out`` (beside it, then renamed onto it) as they come: the rows
    and ids written. Nothing is written when they hold no row (refused saying ``nothing``); a
    folder or file this user may not write is refused naming ``out``, not the temporary file
    beside it."""
    if not out.parent.is_dir():
        raise ExportError(f"cannot write {out}: the folder {out.parent} does not exist")
    fix = "give --out a file in a folder you can write to; nothing was written"
    if out.exists() and not os.access(out, os.W_OK):
        raise ExportError(f"cannot write {out}: the file is not writable (permissions); {fix}")
    try:
        with open_beside(out.parent, out.name) as stream:
            write = _write_parquet if kind == "parquet" else _write_csv
            counts = [(len(f), f.iloc[:, 0].nunique())
                      for f in write(stream, (f for f in frames if len(f)))]
            if not counts:
                raise ExportError(nothing)
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise ExportError(f"cannot write {out}: the file or its folder {out.parent} may not "
                              f"be written ({error.strerror}); {fix}") from None
        raise ExportError(f"cannot write {out}: {error.strerror or error}; "
                          "nothing was written") from None
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def export_forecasts(
    warehouse: str | Path, out: Path, *, week: date | None = None,
    buildings: Sequence[str] | None = None, portfolios: Sequence[str] | None = None,
    resolution: int = 60, as_of: datetime | None = None,
) -> ExportSummary:
    """Write the published forecasts of ``week`` (default: the latest published week) of
    ``buildings`` (default: every building with one), or, given ``portfolios``, those
    portfolios' forecasts, at ``resolution`` minutes, as CSV or Parquet by ``out``'s suffix.
    With ``as_of``, the buildings' forecasts as they were published then (the vintages issued
    at or before it), e.g. what was bid on Monday morning."""
    if as_of is not None and portfolios is not None:
        raise ExportError("--as-of exports buildings' forecasts as issued; a portfolio's is "
                          "computed from the latest ones (give --buildings, or no --portfolios)")
    kind = FORMATS.get(out.suffix.lower())
    if kind is None:
        raise ExportError(f"{out}: unknown file kind {out.suffix!r}; give a .csv or .parquet "
                          "file name")
    if resolution not in RESOLUTIONS:
        raise ExportError(f"--resolution {resolution}: the periods are "
                          f"{', '.join(map(str, RESOLUTIONS))} minutes")
    if week is not None:
        _check_monday(week)
    with connect(warehouse, read_only=True) as con:
        con.execute(f"SET memory_limit = '{OUTPUT_MEMORY}'")
        if portfolios is not None:
            ids = sorted(set(checked_portfolio_ids(con, portfolios)))  # the file's order
            chosen = week or latest_week(con, None)
            frames = (_portfolio_rows(con, ids[i:i + EXPORT_CHUNK], chosen, resolution)
                      for i in range(0, len(ids), EXPORT_CHUNK))
        else:
            ids = fleet_building_ids(con, buildings)
            if as_of is not None and as_of.tzinfo is None:  # the fleet's wall clock
                as_of = as_of.replace(tzinfo=ZoneInfo(fleet_timezone(con, ids)))
            chosen = week or latest_week(con, ids, as_of)
            frames = _building_rows(con, ids, chosen, resolution, as_of)
        issued = f" by {as_of:%Y-%m-%d %H:%M %Z}" if as_of is not None else ""
        written, n_ids = _written(out, kind, frames, (
            f"nothing published{issued} for the week of {chosen} "
            f"({'portfolios' if portfolios is not None else 'buildings'} {shown_ids(list(ids))})"))
    return ExportSummary(path=out, rows=written,
                         kind="portfolio" if portfolios is not None else "building",
                         ids=n_ids, week=chosen, minutes=resolution)

"""A week's published forecasts, or its portfolio forecasts, as one file for an operator's
systems (``wadiro export``): CSV or Parquet, hourly or per settlement period.

Each row is one period of one building (or portfolio): ``period_start`` is its local start in
ISO 8601 with the UTC offset (``2024-03-31T03:00:00+01:00``), ``period_start_utc`` the same
instant in UTC (a timestamp in Parquet, ``...Z`` text in CSV), ``local_time`` the local wall
clock (``2024-03-31 03:00``), then the ``timezone`` and the period's length in ``minutes``.
A week is the building's local Monday 00:00 to the next: 168 hours, 167 or 169 across a clock
change (336, 334 or 338 half-hours). A building's rows carry the published ``model`` and its
``outcome`` (``learned``, ``persistence`` chosen on its merit, or ``degraded``: persistence
because no learned forecast could be trusted), so a persistence-only week is marked in every
row; a building-week *held* out of every bid (its forecast an order of magnitude off the
building's level, :mod:`~tasks.protocol.bid_check`) is never written, and the summary names it.

**Settlement periods** (``resolution`` 30 or 15 minutes): an hour's forecast is split by the
building's own intra-hour shape where its readings came sub-hourly
(:func:`~tasks.warehouse.intra_hour.period_shares`), evenly otherwise. A period
gets its share of the hour's forecast, and the same share of the hour's interval bounds: the
periods of an hour sum to the hour's forecast and to its bounds (to rounding), so the period
bounds are the hour's band split by the shape, not separately calibrated intervals of each
period. A portfolio's hour is split as the sum of its buildings' split forecasts.

**As issued** (``as_of``): each building-week's latest vintage issued by then (the macro
``published_as_of``, written in the building's time zone of then), or each portfolio-week's
(``portfolio_as_of``: the hourly total and
bands the run wrote when it closed, and the time zone its rows were written in then). A
portfolio's hour is split by the buildings that vintage summed, weighted by the forecasts of
theirs it summed, as the latest portfolio's is by its buildings' latest forecasts. The
intra-hour shapes are the ones stored now (the latest 28 days of sub-hourly readings): the
periods of an hour always sum to the hour as issued, and equal the periods exported at the
time while no sub-hourly readings of those buildings have been ingested since.

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
from tasks.protocol.intervals import LEVELS, QUANTILE_COLUMNS, QUANTILES, quantile_name
from tasks.protocol.publication import HELD
from tasks.warehouse.catalog import has_table
from tasks.warehouse.connection import connect
from tasks.warehouse.intra_hour import RESOLUTIONS, period_shares
from tasks.warehouse.portfolio_sql import (
    checked_portfolio_ids,
    portfolio_hours_sql,
    portfolio_timezones_sql,
    read_portfolio_forecasts,
    stored_members_sql,
    stored_parts,
)
from tasks.warehouse.portfolio_vintages import vintage_hours_sql
from tasks.warehouse.selection import fleet_building_ids, fleet_timezone, shown_ids

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
"""File extensions written, and as what."""

BOUNDS = tuple(f"y_{side}_{round(100 * level)}" for level in LEVELS for side in ("lo", "hi"))
VALUES = ("y_hat", *BOUNDS, *QUANTILE_COLUMNS)
"""The columns split over an hour's periods."""

EXPORTED_NAMES = {quantile_name(level): quantile_name(level, ".") for level in QUANTILES}
"""A file names each quantile by its percent (``y_q2.5``, ``y_q97.5``); the warehouse's columns
cannot hold the point (``y_q2_5``)."""


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
    held: tuple[str, ...] = ()
    """Buildings whose forecast of the week was held out of every bid: not written."""

    def line(self) -> str:
        line = (f"wrote {self.rows:,} rows ({self.ids:,} {self.kind}(s), week of {self.week}, "
                f"{self.minutes}-minute periods) to {self.path}")
        if self.held:
            line += (f"; {len(self.held)} building(s) held out of every bid, not written "
                     f"({shown_ids(list(self.held))}: publications.reason says why)")
        return line


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
        **{c: rows[c] for c in extra},
        **{EXPORTED_NAMES.get(c, c): rows[c] for c in VALUES},
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


def latest_portfolio_week(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str],
                          as_of: datetime) -> date:
    """The latest week with a vintage of any of ``portfolios`` issued at or before ``as_of``."""
    week = None
    if has_table(con, "issued_portfolio_forecasts"):
        week = con.execute(
            "SELECT max(target_week) FROM issued_portfolio_forecasts WHERE issued_at <= ? "
            "AND portfolio_id IN (SELECT unnest(?::VARCHAR[]))", [as_of, list(portfolios)]
        ).fetchone()[0]
    if week is None:
        raise ExportError(f"no portfolio forecast is kept as issued by {as_of:%Y-%m-%d %H:%M %Z} "
                          f"(portfolios {shown_ids(list(portfolios))}); runs keep their "
                          "portfolios' vintages from this release on, the buildings' since "
                          "earlier: give --buildings for those")
    return week


def _members(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str]) -> list[str]:
    """The buildings of ``portfolios`` today."""
    return [r[0] for r in con.execute(
        f"SELECT DISTINCT building_id FROM ({stored_members_sql(con, chosen=True)})",
        [list(portfolios)]).fetchall()]


def _published(con: duckdb.DuckDBPyConnection,
               as_of: datetime | None) -> tuple[str, list]:
    """The published forecasts' source and its parameters: the latest vintage, or the one
    issued at ``as_of`` (the macro ``published_as_of``), with ``outcome``, ``timezone`` and
    quantile columns (NULL where the view or macro was made by a release before them and no
    command has written since)."""
    source, params = (("published_forecasts", []) if as_of is None
                      else ("published_as_of(?::TIMESTAMPTZ)", [as_of]))
    columns = [c[0] for c in con.execute(f"SELECT * FROM {source} LIMIT 0", params).description]
    missing = [f"NULL::VARCHAR AS {c}" for c in ("outcome", "timezone") if c not in columns]
    missing += [f"NULL::DOUBLE AS {c}" for c in QUANTILE_COLUMNS if c not in columns]
    if missing:
        source = f"(SELECT *, {', '.join(missing)} FROM {source})"
    return source, params


def _building_hours(con: duckdb.DuckDBPyConnection, buildings: Sequence[str], week: date,
                    as_of: datetime | None = None) -> duckdb.DuckDBPyConnection:
    """The published hours of ``week`` of ``buildings`` (as issued at ``as_of``, when given),
    by building and hour; the executed query, to be fetched."""
    source, source_params = _published(con, as_of)
    return con.execute(
        f"""SELECT p.building_id, p.target_week, p.ts, p.model, p.outcome,
                   coalesce(p.timezone, b.timezone) AS timezone,
                   hour(timezone(coalesce(p.timezone, b.timezone), p.ts)) AS local_hour,
                   {', '.join(VALUES)}
            FROM {source} p JOIN buildings b USING (building_id)
            WHERE p.target_week = ? AND building_id IN (SELECT unnest(?::VARCHAR[]))
              AND p.outcome IS DISTINCT FROM '{HELD}'
            ORDER BY p.building_id, p.ts""", [*source_params, week, list(buildings)])


def held_buildings(con: duckdb.DuckDBPyConnection, buildings: Sequence[str], week: date,
                   as_of: datetime | None = None) -> list[str]:
    """The buildings of ``buildings`` whose forecast of ``week`` (as issued at ``as_of``) was
    held out of every bid (:data:`~tasks.protocol.publication.HELD`): never exported."""
    source, source_params = _published(con, as_of)
    return [r[0] for r in con.execute(
        f"""SELECT DISTINCT building_id FROM {source} WHERE target_week = ?
            AND building_id IN (SELECT unnest(?::VARCHAR[])) AND outcome = '{HELD}'
            ORDER BY 1""", [*source_params, week, list(buildings)]).fetchall()]


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
                                     minutes), "building_id", minutes, ["model", "outcome"])


_LOCAL_HOUR = "hour(timezone(b.timezone, h.ts)) AS local_hour"
_MEMBER_ORDER = "ORDER BY h.portfolio_id, h.ts, h.building_id"
"""The order a portfolio's member hours are summed in: the same sums to the last bit, whether
latest or as issued."""


def _latest_portfolio_hours(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str],
                            week: date) -> pd.DataFrame:
    """The portfolios' ``portfolio_forecasts`` hours of ``week``, with their time zone."""
    zones = con.execute(portfolio_timezones_sql(stored_parts(con)["named"]),
                        [list(portfolios)]).df()
    return read_portfolio_forecasts(con, portfolios, [week]).merge(zones, on="portfolio_id")


def _latest_member_hours(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str],
                         week: date) -> pd.DataFrame:
    """The hours of ``week`` of the buildings each of the portfolios sums (not held)."""
    return con.execute(
        f"""SELECT h.portfolio_id, h.building_id, h.ts, h.y_hat, {_LOCAL_HOUR}
            FROM ({portfolio_hours_sql(**stored_parts(con))}) h
            JOIN buildings b USING (building_id) {_MEMBER_ORDER}""",
        [list(portfolios), [week]]).df()


_VINTAGE = ("SELECT * FROM portfolio_as_of(?::TIMESTAMPTZ) "
            "WHERE portfolio_id IN (SELECT unnest(?::VARCHAR[])) AND target_week = ?")
"""The vintages issued at a time (a first ``?``) of portfolios (a list) and a week."""


def _issued_portfolio_hours(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str],
                            week: date, as_of: datetime) -> pd.DataFrame:
    """The portfolios' hours of ``week`` as issued at ``as_of``: each one's latest vintage
    then, with the time zone its rows were written in."""
    if not has_table(con, "issued_portfolio_forecasts"):
        return pd.DataFrame()
    return con.execute(f"{_VINTAGE} ORDER BY portfolio_id, ts",
                       [as_of, list(portfolios), week]).df()


def _issued_member_hours(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str],
                         week: date, as_of: datetime) -> pd.DataFrame:
    """The hours of the buildings the portfolios' vintages at ``as_of`` summed, as they were
    published then (the forecast of each that the vintage summed)."""
    return con.execute(
        f"""SELECT h.portfolio_id, h.building_id, h.ts, h.y_hat, {_LOCAL_HOUR}
            FROM ({vintage_hours_sql(f"({_VINTAGE})")}) h
            JOIN buildings b USING (building_id) {_MEMBER_ORDER}""",
        [as_of, list(portfolios), week]).df()


def _portfolio_shares(con: duckdb.DuckDBPyConnection, hours: pd.DataFrame,
                      members: pd.DataFrame, minutes: int) -> np.ndarray:
    """A portfolio hour is split as the sum of its buildings' split forecasts (``members``:
    their hours): its shares are theirs weighted by their forecasts (evenly where the hour's
    forecast is 0)."""
    columns = _share_columns(minutes)
    members = members[members["y_hat"].notna()].reset_index(drop=True)
    weighted = pd.DataFrame(_building_shares(con, members, minutes) *
                            members[["y_hat"]].to_numpy(), columns=columns)
    weighted[["portfolio_id", "ts"]] = members[["portfolio_id", "ts"]]
    summed = weighted.groupby(["portfolio_id", "ts"], as_index=False)[columns].sum()
    shares = hours[["portfolio_id", "ts"]].merge(summed, on=["portfolio_id", "ts"],
                                                 how="left")[columns]
    total = shares.sum(axis=1).to_numpy()
    shares = shares.to_numpy(np.float64)
    return np.where((total > 0)[:, None], shares / np.where(total > 0, total, 1.0)[:, None],
                    1.0 / len(columns))


def _portfolio_rows(con: duckdb.DuckDBPyConnection, portfolios: Sequence[str], week: date,
                    minutes: int, as_of: datetime | None = None) -> pd.DataFrame:
    """The file's rows of ``portfolios``: their latest hours, or as issued at ``as_of`` (the
    hours and bands the vintage holds), split alike."""
    hours = (_latest_portfolio_hours(con, portfolios, week) if as_of is None
             else _issued_portfolio_hours(con, portfolios, week, as_of))
    if hours.empty:
        return hours
    # vintages issued before quantiles were (or a macro an earlier release made): none
    hours = hours.assign(**{c: np.nan for c in VALUES if c not in hours})
    if minutes == 60:
        shares = np.ones((len(hours), 1))
    else:
        members = (_latest_member_hours(con, portfolios, week) if as_of is None
                   else _issued_member_hours(con, portfolios, week, as_of))
        shares = _portfolio_shares(con, hours, members, minutes)
    return _frame(split_hours(hours.rename(columns={"portfolio_id": "key"}), shares, minutes),
                  "portfolio_id", minutes, ["n_buildings", "n_buildings_expected"])


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
    With ``as_of``, the forecasts as they were published then (each building-week's, or
    portfolio-week's, latest vintage issued at or before it), e.g. what was bid on Monday
    morning; a time without an offset is the wall clock of the buildings' (or portfolios'
    buildings') most common time zone."""
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
            if as_of is not None and as_of.tzinfo is None:  # the portfolios' wall clock
                members = _members(con, ids)
                as_of = as_of.replace(tzinfo=ZoneInfo(
                    fleet_timezone(con, members) if members else "UTC"))
            chosen = week or (latest_week(con, None) if as_of is None
                              else latest_portfolio_week(con, ids, as_of))
            frames = (_portfolio_rows(con, ids[i:i + EXPORT_CHUNK], chosen, resolution, as_of)
                      for i in range(0, len(ids), EXPORT_CHUNK))
        else:
            ids = fleet_building_ids(con, buildings)
            if as_of is not None and as_of.tzinfo is None:  # the fleet's wall clock
                as_of = as_of.replace(tzinfo=ZoneInfo(fleet_timezone(con, ids)))
            chosen = week or latest_week(con, ids, as_of)
            held = held_buildings(con, ids, chosen, as_of)
            frames = _building_rows(con, ids, chosen, resolution, as_of)
        issued = f" by {as_of:%Y-%m-%d %H:%M %Z}" if as_of is not None else ""
        written, n_ids = _written(out, kind, frames, (
            f"nothing published{issued} for the week of {chosen} "
            f"({'portfolios' if portfolios is not None else 'buildings'} {shown_ids(list(ids))})"))
    return ExportSummary(path=out, rows=written,
                         kind="portfolio" if portfolios is not None else "building",
                         ids=n_ids, week=chosen, minutes=resolution,
                         held=tuple(held) if portfolios is None else ())

"""DDL of the warehouse's input tables.

Timestamps are ``TIMESTAMPTZ`` holding the UTC instant at the *start* of each hour; the
connection helpers set the session time zone to UTC so that what an analyst sees is UTC.
Input tables have no primary-key index on purpose: a 5,000-building fleet is tens of millions
of readings and DuckDB's ART index makes such bulk loads slow and memory hungry. Idempotency
comes instead from replacing a (building, time range) slice inside one transaction.
"""

from __future__ import annotations

INPUT_TABLES: dict[str, str] = {
    "buildings": """
        CREATE TABLE IF NOT EXISTS buildings (
            building_id      VARCHAR PRIMARY KEY,
            site_id          VARCHAR NOT NULL,
            timezone         VARCHAR NOT NULL,
            holiday_country  VARCHAR NOT NULL,
            holiday_subdiv   VARCHAR,
            building_type    VARCHAR,
            source           VARCHAR NOT NULL
        )""",
    "meter_readings": """
        CREATE TABLE IF NOT EXISTS meter_readings (
            building_id  VARCHAR NOT NULL,
            ts           TIMESTAMPTZ NOT NULL,
            kwh          DOUBLE
        )""",
    "weather": """
        CREATE TABLE IF NOT EXISTS weather (
            site_id          VARCHAR NOT NULL,
            ts               TIMESTAMPTZ NOT NULL,
            temperature_c    DOUBLE,
            irradiance_wm2   DOUBLE,
            wind_speed_ms    DOUBLE,
            humidity_pct     DOUBLE,
            kind             VARCHAR NOT NULL DEFAULT 'observed'
        )""",
}
"""``weather.kind`` is ``'observed'`` or ``'forecast'``; a (site_id, ts, kind) is unique."""

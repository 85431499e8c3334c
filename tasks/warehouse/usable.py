"""The one definition of the readings a forecast or a score may use.

A reading an ingest flagged as implausible (``meter_flags``, :mod:`~tasks.ingest.meter_checks`)
stays in ``meter_readings`` as it arrived, but until an operator accepts it (``accepted_at``)
it is missing for every consumer: the hourly frames the protocol reads (training targets, lag
features, both persistence forecasts, the validation week), the scores written with a run's
results and every rescoring, the portfolios' actuals, the report's plots. Each of them reads
:data:`USABLE_READINGS` instead of ``meter_readings``; analysts have it as the view
``usable_readings``.
"""

from __future__ import annotations

USABLE_READINGS = """(
    SELECT m.building_id, m.ts, m.kwh FROM meter_readings AS m
    WHERE NOT EXISTS (SELECT 1 FROM meter_flags AS f
                      WHERE f.building_id = m.building_id AND f.ts = m.ts
                        AND f.accepted_at IS NULL))"""
"""SQL (a parenthesised subquery, usable wherever a table is): ``meter_readings``' rows
(``building_id``, ``ts``, ``kwh``) but those of a flagged hour not accepted."""

"""The pipeline's steps, installed as ``tasks``.

Four rooms, in the order data flows through them:

* :mod:`~tasks.ingest` -- source files (the Cambridge archive, a synthetic fleet)
  to the warehouse's input tables;
* :mod:`~tasks.warehouse` -- the DuckDB warehouse: schema, connections,
  idempotent writes, hourly frames in, result rows out;
* :mod:`~tasks.protocol` -- the forecasting protocol for one (building, week):
  weeks, features, windows, tuning, models, scoring. Pure: no storage, no Prefect.
* :mod:`~tasks.outputs` -- what leaves the warehouse for people: the fleet report, its
  manager's page, the export an operator bids with.

:mod:`~tasks.forecast_tasks` holds the Prefect task a forecasting run computes with, and the
run's Prefect artifacts.
"""

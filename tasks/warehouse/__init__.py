"""The DuckDB warehouse: schema, connections, idempotent writes, hourly frames in, results out."""

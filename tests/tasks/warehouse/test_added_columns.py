"""A warehouse created before columns were added gets them on the next run, its rows kept."""

import duckdb

from tasks.warehouse.schema import ADDED_COLUMNS, TABLES, ensure_schema


def test_older_warehouses_gain_the_added_columns(tmp_path):
    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    added = {table: {c for t, c, _ in ADDED_COLUMNS if t == table} for table, *_ in ADDED_COLUMNS}
    for table, columns in added.items():  # each table as first released
        lines = [line for line in TABLES[table].splitlines()
                 if line.split()[:1] not in ([c] for c in columns)]
        close = next(i for i, line in enumerate(lines) if line.strip() == ")")
        lines[close - 1] = lines[close - 1].rstrip(",")  # the last column left as first released
        con.execute("\n".join(lines))
    con.execute("INSERT INTO model_fits (building_id, model, target_week, status, run_id) "
                "VALUES ('b', 'svr', DATE '2024-04-01', 'ok', 'r0')")
    con.execute("INSERT INTO weather (site_id, ts, temperature_c) VALUES ('s', '2024-04-01 00:00+00', 5)")
    ensure_schema(con)
    ensure_schema(con)  # repeatable
    for table, columns in added.items():
        present = [r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall()]
        assert columns <= set(present)
        fresh = duckdb.connect()  # appended last: the same order as a new warehouse's
        fresh.execute(TABLES[table])
        assert present == [r[0] for r in fresh.execute(f"DESCRIBE {table}").fetchall()]
    assert con.execute("SELECT count(*), any_value(l_eps) FROM model_fits").fetchone() == (1, None)
    assert con.execute("SELECT count(*), any_value(kind), any_value(issued_at) FROM weather").fetchone() == (
        1, "observed", None)
    con.close()

"""A warehouse created before a column was added gets it on the next run, with its rows kept."""

import duckdb
from wadiro_fleet.tasks.warehouse.schema import ADDED_COLUMNS, RESULT_TABLES, ensure_schema


def test_older_warehouses_gain_the_added_columns(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    old = RESULT_TABLES["model_fits"]
    for column, _ in ADDED_COLUMNS["model_fits"]:  # the table as first released
        old = "\n".join(line for line in old.splitlines() if line.split()[:1] != [column])
    old = old.replace("run_id         VARCHAR NOT NULL,", "run_id         VARCHAR NOT NULL")
    con.execute(old)
    con.execute("INSERT INTO model_fits (building_id, model, target_week, status, run_id) "
                "VALUES ('b', 'svr', DATE '2024-04-01', 'ok', 'r0')")
    ensure_schema(con)
    ensure_schema(con)  # repeatable
    columns = {r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'model_fits'"
    ).fetchall()}
    assert {c for c, _ in ADDED_COLUMNS["model_fits"]} <= columns
    assert con.execute("SELECT count(*), any_value(l_eps) FROM model_fits").fetchone() == (1, None)
    con.close()

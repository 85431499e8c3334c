"""``wadiro ingest portfolios``: what it stores, what it replaces, what it refuses (one line,
nothing written)."""

from __future__ import annotations

import pytest

from tasks.warehouse.connection import connect
from tasks.warehouse.schema import ensure_schema
from tests.cli_runs import invoke


@pytest.fixture()
def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        for b in ("b1", "b2", "b3"):
            con.execute("INSERT INTO buildings (building_id, site_id, timezone, holiday_country, holiday_subdiv, building_type, source) VALUES (?, 's', 'UTC', 'GB', NULL, NULL, 't')", [b])
    return path


def _members(path) -> dict[str, list[str]]:
    with connect(path, read_only=True) as con:
        rows = con.execute("SELECT portfolio_id, list(building_id ORDER BY building_id) "
                           "FROM portfolio_members GROUP BY 1 ORDER BY 1").fetchall()
    return dict(rows)


def test_portfolios_are_stored_and_a_file_replaces_the_ones_it_names(warehouse, tmp_path):
    first = tmp_path / "p.csv"
    first.write_text("portfolio_id,building_id\nnorth,b1\nnorth,b2\nsouth,b3\nsouth,b1\n")
    result = invoke("ingest", "portfolios", first, "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert "wrote 2 portfolio(s) with 4 building membership(s) (replacing 0 stored)" in result.output
    assert _members(warehouse) == {"all": ["b1", "b2", "b3"], "north": ["b1", "b2"],
                                   "south": ["b1", "b3"]}
    second = tmp_path / "q.csv"
    second.write_text("portfolio_id,building_id\nnorth,b3\n")
    assert invoke("ingest", "portfolios", second, "--warehouse", warehouse).exit_code == 0
    assert _members(warehouse)["north"] == ["b3"] and _members(warehouse)["south"] == ["b1", "b3"]


def test_columns_read_an_operator_s_own_names_as_the_other_ingests_do(warehouse, tmp_path):
    # Issue 46: the missing-column error suggested --columns, which portfolios did not accept.
    own = tmp_path / "groups.csv"
    own.write_text("Group;Asset;Notes\nnorth;b1;x\nnorth;b2;\n")
    result = invoke("ingest", "portfolios", own, "--delimiter", ";", "--columns",
                    "Group=portfolio_id,Asset=building_id,Notes=", "--warehouse", warehouse)
    assert result.exit_code == 0, result.output
    assert "wrote 1 portfolio(s) with 2 building membership(s)" in result.output
    mapping = tmp_path / "map.json"
    mapping.write_text('{"Group": "portfolio_id", "Asset": "building_id", "Notes": null}')
    own.write_text("Group;Asset;Notes\nsouth;b3;\n")
    assert invoke("ingest", "portfolios", own, "--delimiter", ";", "--columns-file", mapping,
                  "--warehouse", warehouse).exit_code == 0
    assert _members(warehouse) == {"all": ["b1", "b2", "b3"], "north": ["b1", "b2"],
                                   "south": ["b3"]}
    wrong = invoke("ingest", "portfolios", own, "--delimiter", ";", "--columns",
                   "Group=site_id", "--warehouse", warehouse)
    assert wrong.exit_code == 1 and "'site_id', which is not a column of a portfolios file" in (
        wrong.output), wrong.output


@pytest.mark.parametrize("text, says", [
    ("portfolio_id,building_id\nall,b1\n", "line 2, column 'portfolio_id': the portfolio 'all'"),
    ("portfolio_id,building_id\nn,b1\nn,b1\n", "building 'b1' is listed twice in portfolio 'n' "
                                               "(line 2 and line 3)"),
    ("portfolio_id,building_id\nn,b1\nn,nope\n", "1 building id(s) not in the buildings table: "
                                                 "'nope'"),
    ("portfolio_id,building_id\n\"a,b\",b1\n", "holds a comma"),
    ("portfolio,building_id\nn,b1\n", "missing required column(s) 'portfolio_id'"),
    ("portfolio_id,building_id\n,b1\n", "line 2"),
])
def test_a_bad_file_is_one_line_and_writes_nothing(warehouse, tmp_path, text, says):
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    result = invoke("ingest", "portfolios", bad, "--warehouse", warehouse)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert says in lines[0]
    assert list(_members(warehouse)) == ["all"]

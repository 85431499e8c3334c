"""A file's declared contract: its header, each column's cells and the key, judged as declared,
each refusal naming the line and column a person would fix."""

import doctest

import pyarrow as pa
import pytest

from tasks.errors import PipelineError
from tasks.ingest import contract as contract_module
from tasks.ingest.contract import Column, FileContract, FileOptions
from tasks.ingest.plausibility import IRRADIANCE_WM2, TEMPERATURE_C

SENSORS = FileContract(
    "a sensors file",
    (Column("site_id", "id", what="site id", listed="--sites"),
     Column("ts", "time"),
     Column("temperature_c", "number", filled=False, bound=TEMPERATURE_C),
     Column("irradiance_wm2", "number", required=False, filled=False, bound=IRRADIANCE_WM2),
     Column("note", required=False, filled=False)))
METERS = FileContract("a meters file", (Column("site_id", "id"), Column("meter_id", "id")),
                      key=("site_id", "meter_id"),
                      repeated="meter {meter_id!r} is listed twice at site {site_id!r}")


def _file(tmp_path, text, name="s.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_module_example_runs():
    assert doctest.testmod(contract_module, optionflags=doctest.NORMALIZE_WHITESPACE).failed == 0


def test_required_and_optional_follow_the_declaration():
    assert SENSORS.required == ("site_id", "ts", "temperature_c")
    assert SENSORS.optional == ("irradiance_wm2", "note")
    assert SENSORS.requiring("note").required == ("site_id", "ts", "temperature_c", "note")


def test_cells_become_values_and_absent_optional_columns_are_missing(tmp_path):
    path = _file(tmp_path, "site_id,ts,temperature_c\n s1 ,t0,1.5\ns2,t0,\n")
    cells = SENSORS.read(path)
    assert cells.strings("site_id").tolist() == ["s1", "s2"]  # trimmed
    assert cells["temperature_c"].to_pylist() == [1.5, None]
    assert cells.blank == {"temperature_c": 1}  # blank as read; the absent column has none
    assert cells["irradiance_wm2"].to_pylist() == [None, None]
    assert cells["irradiance_wm2"].type == pa.float64()
    assert cells["note"].to_pylist() == [None, None]


@pytest.mark.parametrize(("text", "expected"), [
    ("site_id,ts\ns1,t0\n", r"missing required column\(s\) 'temperature_c'"),
    ("site_id,ts,temperature_c,wind\ns1,t0,1,2\n", r"unexpected column\(s\) 'wind'"),
    ("site_id,ts,temperature_c\n,t0,1\n", r"line 2, column 'site_id': empty cell"),
    ("site_id,ts,temperature_c\ns1,t0,1\n\"a,b\",t0,1\n",
     r"line 3, column 'site_id': site id 'a,b' holds a comma"),
    ("site_id,ts,temperature_c\ns1,t0,1\n\"s\u202e2\",t0,1\n",
     r"line 3, column 'site_id': site id .* holds U\+202E"),
    ("site_id,ts,temperature_c\ns1,t0,warm\n", r"line 2, column 'temperature_c': 'warm' is not a "
     "number"),
    ("site_id,ts,temperature_c\ns1,t0,1\ns1,t0,99\n",
     r"line 3, column 'temperature_c': 99 is not a finite value from -90 to 60 degC"),
])
def test_each_refusal_names_its_line_and_column(tmp_path, text, expected):
    with pytest.raises(PipelineError, match=expected):
        SENSORS.read(_file(tmp_path, text))


def test_a_repeated_key_names_both_lines(tmp_path):
    path = _file(tmp_path, "site_id,meter_id\ns1,m1\ns2,m1\ns1,m2\ns1,m1\n")
    with pytest.raises(PipelineError, match=r"line 5, column 'meter_id': meter 'm1' is listed "
                       r"twice at site 's1' \(line 2 and line 5\)"):
        METERS.read(path)
    assert METERS.read(_file(tmp_path, "site_id,meter_id\ns1,m1\ns2,m1\n", "ok.csv")).rows == 2


def test_a_key_is_declared_over_id_or_text_columns():
    with pytest.raises(ValueError, match="a key is made of id or text columns"):
        FileContract("a series", (Column("site_id", "id"), Column("ts", "time")),
                     key=("site_id", "ts"))


def test_implausible_numbers_are_missing_and_counted_when_asked(tmp_path):
    path = _file(tmp_path, "site_id,ts,temperature_c,irradiance_wm2\ns1,t0,99,-10\ns1,t1,2,5\n")
    cells = SENSORS.read(path, policy="missing")
    assert cells["temperature_c"].to_pylist() == [None, 2.0]
    assert cells["irradiance_wm2"].to_pylist() == [0.0, 5.0]  # a sensor's offset, clipped
    assert (cells.tally.implausible, cells.tally.clipped) == (1, 1)


def test_a_column_with_aliases_is_there_exactly_once(tmp_path):
    energy = FileContract("an energy file", (
        Column("building_id", "id"), Column("kwh", "number", aliases=("value",))))
    cells = energy.read(_file(tmp_path, "building_id,value\nb1,3\n"))
    assert cells["kwh"].to_pylist() == [3.0]
    with pytest.raises(PipelineError, match="an energy file needs exactly one kwh column, 'kwh' "
                       "or 'value'"):
        energy.read(_file(tmp_path, "building_id,kwh,value\nb1,3,3\n", "both.csv"))
    with pytest.raises(PipelineError, match="needs exactly one kwh column"):
        energy.read(_file(tmp_path, "building_id\nb1\n", "neither.csv"))
    optional = FileContract("an energy file", (
        Column("building_id", "id"), Column("kwh", "number", required=False, aliases=("value",))))
    neither = optional.read(_file(tmp_path, "building_id\nb1\n", "neither.csv"))
    assert neither["kwh"].to_pylist() == [None]


def test_the_column_mapping_targets_only_declared_columns(tmp_path):
    path = _file(tmp_path, "Site,ts,temperature_c\ns1,t0,1\n")
    cells = SENSORS.read(path, FileOptions(columns=("Site=site_id",)))
    assert cells.strings("site_id").tolist() == ["s1"]
    with pytest.raises(PipelineError, match="'Site' to 'station', which is not a column of a "
                       "sensors file"):
        SENSORS.read(path, FileOptions(columns=("Site=station",)))


def test_other_columns_are_one_per_id_named_by_it(tmp_path):
    wide = FileContract("a wide file", (Column("ts", "time"),),
                        others=Column("*", "number", filled=False, what="meter id"))
    stream = wide.open(_file(tmp_path, "ts,m1,m2\nt0,1,2\n"))
    assert wide.other_columns(stream.columns) == ["m1", "m2"]
    stream.close()
    with pytest.raises(PipelineError, match=r"a wide file needs ts and one column per meter id; "
                       r"found only \['ts'\]"):
        wide.open(_file(tmp_path, "ts\nt0\n", "none.csv"))
    with pytest.raises(PipelineError, match=r"column 2 of the header: meter id 'm\\x001'"):
        wide.open(_file(tmp_path, "ts,m\x001\nt0,1\n", "nul.csv"))

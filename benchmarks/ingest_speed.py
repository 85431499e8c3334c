"""How long ``wadiro ingest`` takes at fleet scale: the synthetic fleet, then an operator's
meter exports and weather feed of the same fleet.

Steps, each timed as a whole command (wall) and as the ingest itself (what the command prints):

1. ``wadiro ingest synthetic --buildings N --weeks W`` into a new warehouse;
2. the same again into that warehouse (every stored hour replaced);
3. the fleet's last week of readings as a wide CSV (``ts`` and one column per building),
   ingested into that warehouse (the hours are stored already: each is replaced by itself);
4. the fleet's last four weeks as a long CSV (``building_id, ts, kwh``);
5. every site's observed weather of the whole period as a CSV.

The files are written from the warehouse after step 1 (DuckDB), so every step ingests what the
fleet holds. No Prefect server is configured for the commands. Numbers are medians of
``--repeat`` runs; on a shared machine compare only numbers measured side by side.

    python benchmarks/ingest_speed.py --buildings 1000 --weeks 52 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

WADIRO = str(Path(sys.executable).parent / "wadiro")
ITSELF = re.compile(r"\(ingest itself ([0-9.]+) s\)")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    return {**env, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _timed(*args: str) -> tuple[float, float, str]:
    """Wall seconds, the ingest's own seconds, and the summary line of ``wadiro ARGS``."""
    began = time.perf_counter()
    done = subprocess.run([WADIRO, *args], env=_env(), capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"wadiro {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    line = done.stdout.strip().splitlines()[-1]
    return wall, float(ITSELF.search(line).group(1)), line


def _export(warehouse: Path, folder: Path) -> dict[str, Path]:
    """The operator's files of steps 3-5, written from the fleet in ``warehouse``."""
    files = {"wide": folder / "last-week-wide.csv", "long": folder / "last-4-weeks-long.csv",
             "weather": folder / "weather-observed.csv"}
    with duckdb.connect(str(warehouse), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        end = con.execute("SELECT max(ts) FROM meter_readings").fetchone()[0]
        wide = con.execute(
            "SELECT strftime(ts, '%Y-%m-%dT%H:%M:%SZ') AS ts, building_id, kwh "
            "FROM meter_readings WHERE ts > ? - INTERVAL 168 HOUR", [end]).df()
        table = wide.pivot(index="ts", columns="building_id", values="kwh").sort_index()
        table.to_csv(files["wide"], float_format="%.3f")
        con.execute(
            f"COPY (SELECT building_id, strftime(ts, '%Y-%m-%dT%H:%M:%SZ') AS ts, kwh "
            f"FROM meter_readings WHERE ts > TIMESTAMPTZ '{end}' - INTERVAL 672 HOUR "
            f"ORDER BY building_id, ts) TO '{files['long']}' (HEADER, DELIMITER ',')")
        con.execute(
            f"COPY (SELECT site_id, strftime(ts, '%Y-%m-%dT%H:%M:%SZ') AS ts, temperature_c, "
            f"irradiance_wm2, wind_speed_ms, humidity_pct FROM weather WHERE kind = 'observed' "
            f"ORDER BY site_id, ts) TO '{files['weather']}' (HEADER, DELIMITER ',')")
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--buildings", type=int, default=1000)
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=None,
                        help="Folder for the warehouses and files (default: a temporary one).")
    args = parser.parse_args()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="ingest-speed-"))
    scratch.mkdir(parents=True, exist_ok=True)
    fleet = ["--buildings", str(args.buildings), "--start", "2024-01-01", "--weeks",
             str(args.weeks), "--seed", "0"]
    times: dict[str, list[tuple[float, float]]] = {}
    lines: dict[str, str] = {}
    files: dict[str, Path] = {}
    for run in range(args.repeat):
        warehouse = scratch / f"w{run}.duckdb"
        warehouse.unlink(missing_ok=True)
        steps = [("1. synthetic, new warehouse", ["ingest", "synthetic", *fleet]),
                 ("2. synthetic again", ["ingest", "synthetic", *fleet])]
        for name, command in steps:
            wall, itself, lines[name] = _timed(*command, "--warehouse", str(warehouse))
            times.setdefault(name, []).append((wall, itself))
        if not files:
            files = _export(warehouse, scratch)
        for name, command in (
                ("3. readings, last week, wide CSV", ["ingest", "readings", str(files["wide"])]),
                ("4. readings, last 4 weeks, long CSV", ["ingest", "readings", str(files["long"])]),
                ("5. weather, observed, every site", ["ingest", "weather", str(files["weather"]),
                                                      "--kind", "observed"])):
            wall, itself, lines[name] = _timed(*command, "--warehouse", str(warehouse))
            times.setdefault(name, []).append((wall, itself))
        warehouse.unlink()
    print(f"{args.buildings} buildings x {args.weeks} weeks, median of {args.repeat} "
          f"(load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    print("| step | wall s | ingest itself s |")
    print("| --- | --- | --- |")
    for name, values in times.items():
        walls, itselves = zip(*values, strict=True)
        print(f"| {name} | {statistics.median(walls):.1f} | {statistics.median(itselves):.1f} |")
    for name, line in lines.items():
        print(f"{name}: {line}")
    if args.scratch is None:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()

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

**Memory** (``--memory-mb N``, instead of the steps above): a generated meter export of about N MB
(1,000 buildings, hourly, random energies), long (``building_id, ts, kwh``) and wide (``ts`` and a
column per building), each ingested by ``wadiro ingest readings`` into a warehouse holding only
the buildings, then again over itself (every hour replaced). Each command's wall time and peak
resident memory (the child's ``ru_maxrss``, from ``wait4``) are printed, with the peak as a
multiple of the file's size. ``--baseline-tree DIR`` runs the same commands, interleaved, on
another copy of the code (e.g. ``git archive HEAD~1 | tar -x -C DIR``), and prints the ratios.

    python benchmarks/ingest_speed.py --memory-mb 200 --repeat 2 --baseline-tree /tmp/before
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
import numpy as np
import pandas as pd

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


_LAUNCHER = """
import sys
for finder in sys.meta_path:  # the editable install's map of packages to folders
    mapping = getattr(sys.modules.get(getattr(finder, "__module__", ""), None), "MAPPING", None)
    if isinstance(mapping, dict) and "tasks" in mapping:
        mapping.update({"tasks": sys.argv[1] + "/tasks",
                        "flows": sys.argv[1] + "/flows",
                        "wadiro_models": sys.argv[1] + "/wadiro_models"})
sys.argv = ["wadiro", *sys.argv[2:]]
from flows.cli import app
app()
"""


def _measured(tree: Path | None, *args: str) -> tuple[float, float, str]:
    """Wall seconds, peak resident MB and the last output line of ``wadiro ARGS``, run from the
    installed command or, with ``tree``, from the code in that folder."""
    command = ([WADIRO, *args] if tree is None else
               [sys.executable, "-c", _LAUNCHER, str(tree), *args])
    began = time.perf_counter()
    # run from the tree: from the repository's root, ``python -c`` would import its packages
    # (the current directory comes first on the path) instead of the tree's
    child = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, cwd=tree)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"wadiro {' '.join(args)} failed:\n{output}")
    return wall, usage.ru_maxrss / 1024, output.strip().splitlines()[-1]


def _memory_files(folder: Path, megabytes: float, buildings: int = 1000) -> dict[str, Path]:
    """A buildings file and a long and a wide meter export of about ``megabytes`` MB each."""
    ids = [f"building-{i:04d}" for i in range(buildings)]
    files = {"buildings": folder / "buildings.csv", "long": folder / "long.csv",
             "wide": folder / "wide.csv"}
    files["buildings"].write_text("building_id,site_id,timezone,holiday_country\n" + "".join(
        f"{b},s1,Europe/London,GB\n" for b in ids))
    rng = np.random.default_rng(0)
    hours = int(megabytes * 1e6 / 42 / buildings)  # a long row: 'building-0000,2024-...Z,12.345'
    stamps = pd.date_range("2024-01-01", periods=hours, freq="h", tz="UTC").strftime(
        "%Y-%m-%dT%H:%M:%SZ").to_numpy()
    with files["long"].open("w") as out:
        out.write("building_id,ts,kwh\n")
        for b in ids:
            values = rng.uniform(10, 99, hours)
            out.write("".join(f"{b},{t},{v:.3f}\n" for t, v in zip(stamps, values, strict=True)))
    rows = int(megabytes * 1e6 / 7 / buildings)  # a wide cell: '12.345,'
    stamps = pd.date_range("2022-01-01", periods=rows, freq="h", tz="UTC").strftime(
        "%Y-%m-%dT%H:%M:%SZ").to_numpy()
    with files["wide"].open("w") as out:
        out.write("ts," + ",".join(ids) + "\n")
        for t in stamps:
            out.write(t + "," + ",".join(f"{v:.3f}" for v in rng.uniform(10, 99, buildings)) + "\n")
    return files


def memory(args: argparse.Namespace, scratch: Path) -> None:
    """Peak memory and wall time of ingesting a large meter export (see the module)."""
    files = _memory_files(scratch, args.memory_mb)
    trees = {"after": None, **({"before": args.baseline_tree} if args.baseline_tree else {})}
    results: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for run in range(args.repeat):
        for layout in ("long", "wide"):
            for code, tree in trees.items():
                warehouse = scratch / f"m-{code}.duckdb"
                warehouse.unlink(missing_ok=True)
                _, floor, _ = _measured(tree, "ingest", "buildings", str(files["buildings"]),
                                        "--warehouse", str(warehouse))
                results.setdefault((layout, "floor", code), []).append((0.0, floor))
                for step in ("new warehouse", "again, over itself"):
                    wall, peak, line = _measured(tree, "ingest", "readings", str(files[layout]),
                                                 "--warehouse", str(warehouse))
                    results.setdefault((layout, step, code), []).append((wall, peak))
                    if run == 0 and step == "new warehouse":
                        print(f"{code}, {layout}: {line}")
                warehouse.unlink()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; median of {args.repeat}")
    print("(floor: the peak of 'wadiro ingest buildings', what the command costs before any "
          "reading)")
    print("| file | step | code | wall s | peak RSS MB | peak / file size | (peak - floor) / file "
          "size |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    medians = {key: (statistics.median(w for w, _ in values),
                     statistics.median(p for _, p in values))
               for key, values in results.items()}
    for (layout, step, code), (wall, peak) in medians.items():
        if step == "floor":
            continue
        size = files[layout].stat().st_size / 1e6
        floor = medians[layout, "floor", code][1]
        print(f"| {layout} CSV, {size:.0f} MB | {step} | {code} | {wall:.1f} | {peak:.0f} | "
              f"{peak / size:.1f}x | {(peak - floor) / size:.1f}x |")
    for (layout, step, code), (wall, peak) in medians.items():
        if code == "after" and step != "floor" and (layout, step, "before") in medians:
            before_wall, before_peak = medians[layout, step, "before"]
            print(f"{layout}, {step}: after / before: wall {wall / before_wall:.2f}, "
                  f"peak memory {peak / before_peak:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--buildings", type=int, default=1000)
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=None,
                        help="Folder for the warehouses and files (default: a temporary one).")
    parser.add_argument("--memory-mb", type=float, default=None,
                        help="Measure the memory of ingesting meter exports of this size instead.")
    parser.add_argument("--baseline-tree", type=Path, default=None,
                        help="With --memory-mb: another copy of the code to compare with.")
    args = parser.parse_args()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="ingest-speed-"))
    scratch.mkdir(parents=True, exist_ok=True)
    if args.memory_mb is not None:
        memory(args, scratch)
        if args.scratch is None:
            shutil.rmtree(scratch)
        return
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

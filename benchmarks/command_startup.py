"""What a ``wadiro`` command costs before and after its work, and whether several survive a
busy machine.

1. Start-up: ``wadiro ingest cambridge`` of one building-week, ``--repeat`` times, one at a
   time. Each command prints how long its ingest itself took; the rest of its wall time
   (interpreter, imports, orchestration, exit) is the fixed cost of a command.
   The processor time of each command (user + system, of it and its children) is printed too:
   a command that computes on one core takes about that long on an idle machine, whatever the
   load while it is measured.
2. Stress: three ``wadiro ingest cambridge`` of a whole year at once, each into its own
   warehouse, while two CPU-bound processes per core run. Every command must succeed.

No Prefect server is configured (``PREFECT_API_URL`` is removed from the commands'
environment), as on a fresh machine. The one-minute load average is printed with each part:
on a shared machine, compare numbers measured under similar load only.

    python benchmarks/command_startup.py --archive ../shared/data/cambridge-estates
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WADIRO = str(Path(sys.executable).parent / "wadiro")
BURN = "import time\nend = time.time() + 3600\nwhile time.time() < end: pass\n"
ITSELF = re.compile(r"\(ingest itself ([0-9.]+) s\)")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
    return {**env, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _ingest(archive: str, warehouse: Path, *selection: str) -> list[str]:
    return [WADIRO, "ingest", "cambridge", "--path", archive, *selection,
            "--warehouse", str(warehouse)]


def startup(archive: str, repeat: int, scratch: Path) -> None:
    python = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python.append(time.perf_counter() - began)
    walls, itselves, cpus = [], [], []
    for i in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(
            _ingest(archive, scratch / f"startup-{i}.duckdb", "--buildings", "UCam_Building_b0",
                    "--start", "2018-03-05", "--end", "2018-03-11"),
            env=_env(), capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - began)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        itselves.append(float(ITSELF.search(done.stdout).group(1)))
    fixed = [w - s for w, s in zip(walls, itselves, strict=True)]
    fixed_cpu = [c - s for c, s in zip(cpus, itselves, strict=True)]
    print(f"1. start-up, {repeat} commands one after another (load average {_load()}, "
          f"{os.cpu_count()} cores)")
    print("| what | median s | min s | max s |")
    print("| --- | --- | --- | --- |")
    for name, values in (("python -c pass", python), ("wadiro ingest cambridge, wall", walls),
                         ("  of which the ingest itself", itselves),
                         ("  fixed cost (wall - ingest itself)", fixed),
                         ("wadiro ingest cambridge, processor time", cpus),
                         ("  fixed cost (processor time - ingest itself)", fixed_cpu)):
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | "
              f"{max(values):.2f} |")


def stress(archive: str, scratch: Path) -> bool:
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2 * os.cpu_count())]
    try:
        time.sleep(2.0)
        load = _load()
        began = time.perf_counter()
        commands = [subprocess.Popen(
            _ingest(archive, scratch / f"stress-{i}.duckdb", "--start", "2018-01-01",
                    "--end", "2018-12-31"),
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(3)]
        ended: dict[int, float] = {}
        while len(ended) < len(commands):
            for i, command in enumerate(commands):
                if i not in ended and command.poll() is not None:
                    ended[i] = time.perf_counter() - began
            time.sleep(0.05)
        results = []
        for i, command in enumerate(commands):
            out, err = command.communicate()
            results.append((command.returncode, ended[i], out, err))
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"\n2. stress: three ingests of the whole of 2018 at once, {len(burners)} CPU-bound "
          f"processes beside them (load average {load} when they started)")
    print("| command | exit code | wall s | ingest itself s |")
    print("| --- | --- | --- | --- |")
    for i, (code, wall, out, err) in enumerate(results, 1):
        itself = ITSELF.search(out)
        print(f"| {i} | {code} | {wall:.1f} | {itself.group(1) if itself else '-'} |")
        if code != 0:
            print(err[-2000:])
    return all(code == 0 for code, *_ in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default=str(Path(__file__).resolve().parents[1].parent
                                                 / "shared" / "data" / "cambridge-estates"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-stress", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        startup(args.archive, args.repeat, Path(scratch))
        if not args.no_stress and not stress(args.archive, Path(scratch)):
            sys.exit(1)


if __name__ == "__main__":
    main()

"""The machine refusing a write -- a full disk, a file-size limit, a read-only folder -- or
memory is one line (exit code 1), and the warehouse keeps what it held (issue 30: 164-168 lines
of traceback each before).

Each case runs ``wadiro`` as a real process in the condition itself: a small file system of its
own (a tmpfs mounted in a mount namespace of its own, ``unshare -rm``), a read-only bind mount
over the warehouse's folder with the warehouse file itself writable (so DuckDB opens it and
fails only when it writes its ``.wal`` beside it), or a file-size limit (``RLIMIT_FSIZE``) set in
the process before it starts. What was stored is compared, table by table, before and after.
An address-space limit (``ulimit -v``) fails in too many places outside Python (glibc aborts,
thread pools) to be a stable test; the errors Python does see are checked one by one below.
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import duckdb
import pytest

from tasks.ingest.synthetic_fleet import FleetSpec, ingest_synthetic
from tasks.warehouse.refusals import ResourceError, machine_refusal, resource_error
from tests.flows.processes import local_env
from tests.flows.warehouse_rows import make_warehouse

INPUTS = ("buildings", "meter_readings", "weather")
UNSHARE = shutil.which("unshare")


def _namespaces() -> bool:
    """Whether this machine lets a process mount a file system of its own (``unshare -rm``)."""
    if UNSHARE is None:
        return False
    done = subprocess.run([UNSHARE, "-rm", "sh", "-c", "mount -t tmpfs none /mnt 2>/dev/null || "
                           "mount -t tmpfs none /tmp"], capture_output=True)
    return done.returncode == 0


needs_namespaces = pytest.mark.skipif(not _namespaces(), reason="no mount namespaces here "
                                      "(unshare -rm): cannot make a small or read-only folder")


def contents(warehouse: Path, tables=None) -> dict[str, list[tuple]]:
    """Every row of ``tables`` (default: all), sorted; opening the file is itself the check
    that it is not damaged."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        names = tables or [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()]
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in names}


def readings_csv(source: Path, path: Path) -> Path:
    """The readings of ``source`` as an operator's long CSV (UTC), each value 1 kWh higher."""
    with duckdb.connect(str(source), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        frame = con.execute("SELECT building_id, strftime(ts, '%Y-%m-%d %H:%M') AS ts, "
                            "kwh + 1 AS kwh FROM meter_readings ORDER BY ALL").df()
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Path:
    return make_warehouse(tmp_path_factory.mktemp("fleet") / "w.duckdb", buildings=3)


@pytest.fixture(scope="module")
def corrections(fleet, tmp_path_factory) -> Path:
    return readings_csv(fleet, tmp_path_factory.mktemp("csv") / "readings.csv")


COMMANDS = {
    "ingest": lambda csv: ["ingest", "readings", str(csv), "--timezone", "UTC"],
    "forecast": lambda csv: ["forecast", "--week", "2024-04-01", "--models", "seasonal_naive,svr",
                             "--trials", "1", "--workers", "1"],
}


PROGRESS = re.compile(r"^\w+: \d+/\d+ building-weeks done \(\d+ %\), [\d.]+ min$")
"""A run's progress line (standard error is not a terminal here)."""


def one_line(done: subprocess.CompletedProcess) -> str:
    """The command's one ``error: ...`` line, after exit status 1; besides it, only progress."""
    lines = [line for line in done.stderr.strip().splitlines() if not PROGRESS.match(line)]
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), (
        done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stdout, done.stdout[-3000:]
    return lines[0]


def in_namespace(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """``script`` (bash) as root of a user and mount namespace of its own; what the command in it
    wrote to standard output and error is in ``out/``."""
    done = subprocess.run([UNSHARE, "-rm", "bash", "-c", script], capture_output=True, text=True,
                          env=local_env(), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    return subprocess.CompletedProcess([], int((out / "rc").read_text()),
                                       (out / "stdout").read_text(), (out / "stderr").read_text())


@needs_namespaces
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_full_disk_is_one_line_and_the_warehouse_keeps_what_it_held(
    fleet, corrections, tmp_path, command, wadiro_process
):
    small, out = tmp_path / "small", tmp_path / "out"
    small.mkdir()
    out.mkdir()
    size = fleet.stat().st_size
    free = 64 * 1024  # the command starts; its first large write does not fit
    args = " ".join(f"'{a}'" for a in COMMANDS[command](corrections))
    done = in_namespace(f"""
        mount -t tmpfs -o size={size + 1024 * 1024} tmpfs {small}
        cp {fleet} {small}/w.duckdb
        head -c {1024 * 1024 - free} /dev/zero > {small}/filler
        {wadiro_process.command} {args} --warehouse {small}/w.duckdb > {out}/stdout 2> {out}/stderr
        echo $? > {out}/rc
        rm {small}/filler
        cp -r {small}/w.duckdb* {out}/
        """, tmp_path)
    line = one_line(done)
    assert "the disk is full" in line and "No space left on device" in line, line
    if command == "forecast":  # a run says what of it is stored (issue 60)
        assert re.search(r"the \d+ building-week\(s\) of this write are not stored; (nothing "
                         r"of run \S+ is stored but its start|the \d+ building-week\(s\) run \S+ wrote before "
                         r"stand)", line), line
    else:
        assert line.endswith("what was stored before is unchanged"), line
    tables = None if command == "ingest" else INPUTS  # a run may have recorded its start
    assert contents(out / "w.duckdb", tables) == contents(fleet, tables)


@needs_namespaces
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_read_only_folder_is_one_line_and_the_warehouse_keeps_what_it_held(
    fleet, corrections, tmp_path, command, wadiro_process
):
    folder, out = tmp_path / "readonly", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    shutil.copy(fleet, out / "w.duckdb")
    (folder / "w.duckdb").touch()  # the mount point of the writable file
    args = " ".join(f"'{a}'" for a in COMMANDS[command](corrections))
    done = in_namespace(f"""
        mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}
        mount --bind {out}/w.duckdb {folder}/w.duckdb
        {wadiro_process.command} {args} --warehouse {folder}/w.duckdb > {out}/stdout 2> {out}/stderr
        echo $? > {out}/rc
        """, tmp_path)
    line = one_line(done)
    assert "read-only file system" in line
    assert "give a warehouse in a folder you can write to" in line
    assert contents(out / "w.duckdb") == contents(fleet)


@contextmanager
def immutable(folder: Path):
    """``folder`` made immutable (``chattr +i``: nothing in it can be created, even by root), or
    the test skipped where the file system or the user cannot."""
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(folder)],
                                        capture_output=True).returncode != 0:
        pytest.skip("cannot make a folder immutable here (chattr +i)")
    try:
        yield folder
    finally:
        subprocess.run([chattr, "-i", str(folder)], check=True)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_folder_where_the_log_cannot_be_created_is_one_line(
    fleet, corrections, tmp_path, command, wadiro_process
):
    # Issue 46: EPERM on the .wal ("Operation not permitted") was a 55-line traceback; a
    # read-only mount (EROFS) was one line already.
    folder = tmp_path / "immutable"
    folder.mkdir()
    warehouse = Path(shutil.copy(fleet, folder / "w.duckdb"))
    with immutable(folder):
        done = wadiro_process.run([*COMMANDS[command](corrections), "--warehouse",
                               str(warehouse)], capture_output=True, text=True, env=local_env(),
                              cwd=tmp_path, timeout=300)
    line = one_line(done)
    assert "its folder or file is not open to this user (permissions)" in line, line
    assert "Operation not permitted" in line and str(warehouse) in line, line
    assert line.endswith("what was stored before is unchanged"), line
    assert contents(warehouse) == contents(fleet)


def _limit_files(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_file_size_limit_below_the_warehouse_is_refused_before_anything_is_written(
    fleet, corrections, tmp_path, command, wadiro_process
):
    warehouse = shutil.copy(fleet, tmp_path / "w.duckdb")
    limit = 100 * 1024
    done = wadiro_process.run([*COMMANDS[command](corrections), "--warehouse", str(warehouse)],
                          capture_output=True, text=True, env=local_env(), cwd=tmp_path,
                          preexec_fn=_limit_files(limit), timeout=300)
    line = one_line(done)
    assert line == (f"error: cannot write warehouse {warehouse}: the file-size limit, {limit:,} "
                    f"bytes, is below its size, {fleet.stat().st_size:,} bytes (a write cut short "
                    "there would damage it); raise the limit (`ulimit -f`, or the service's "
                    "LimitFSIZE), then run the command again; what was stored before is unchanged")
    # Before the check, the forecast left this file unreadable (a block torn at the limit).
    assert contents(warehouse) == contents(fleet)


def test_a_file_size_limit_that_stops_a_write_is_one_line_and_nothing_is_lost(
    tmp_path, wadiro_process
):
    # A warehouse of one week, then an export of 20 buildings' 14 weeks: its log (.wal) grows
    # past a limit that the warehouse itself is under.
    warehouse = tmp_path / "w.duckdb"
    ingest_synthetic(warehouse, FleetSpec(buildings=20, start=date(2024, 1, 1), weeks=1, seed=3))
    source = tmp_path / "source.duckdb"
    ingest_synthetic(source, FleetSpec(buildings=20, start=date(2024, 1, 1), weeks=14, seed=3))
    csv = readings_csv(source, tmp_path / "readings.csv")
    before = contents(warehouse)
    limit = warehouse.stat().st_size + 256 * 1024
    done = wadiro_process.run(["ingest", "readings", str(csv), "--timezone", "UTC",
                           "--warehouse", str(warehouse)], capture_output=True, text=True,
                          env=local_env(), cwd=tmp_path, preexec_fn=_limit_files(limit),
                          timeout=300)
    line = one_line(done)
    assert "a file-size limit stopped the write" in line and "File too large" in line, line
    assert contents(warehouse) == before


@pytest.mark.parametrize(("error", "cause"), [
    (MemoryError(), "the process ran out of memory (MemoryError)"),
    (duckdb.OutOfMemoryException("Out of Memory Error: Failed to allocate block of 2048 bytes "
                                 "(bad allocation)"),
     "the process ran out of memory (Failed to allocate block of 2048 bytes (bad allocation))"),
    (RuntimeError("can't start new thread"),
     "the process ran out of memory (can't start new thread)"),
    (ImportError("/x/_duckdb.so: failed to map segment from shared object"),
     "the process ran out of memory (/x/_duckdb.so: failed to map segment from shared object)"),
    (OSError(28, "No space left on device"),
     "the disk is full ([Errno 28] No space left on device)"),
    (duckdb.TransactionException('TransactionContext Error: Failed to commit: Cannot open file '
                                 '"/x/w.duckdb.wal": Operation not permitted'),
     "its folder or file is not open to this user (permissions) (Cannot open file "
     '"/x/w.duckdb.wal": Operation not permitted)'),
])
def test_the_machine_s_refusals_python_sees_are_named(error, cause):
    refused = resource_error(error, "cannot write warehouse w.duckdb")
    assert isinstance(refused, ResourceError)
    assert str(refused).startswith(f"cannot write warehouse w.duckdb: {cause}; ")
    assert str(refused).endswith("; what was stored before is unchanged")


def test_other_errors_are_not_taken_for_the_machine_s():
    assert resource_error(ValueError("bad value"), "x") is None
    assert machine_refusal(RuntimeError("a bug")) is None  # its traceback is wanted
    assert machine_refusal(ImportError("No module named 'nope'")) is None
    assert machine_refusal(OSError(2, "No such file or directory", "f.csv")) == (
        "f.csv: No such file or directory")


def test_memory_running_out_while_a_command_loads_its_libraries_is_one_line(monkeypatch,
                                                                            capsys):
    """Under a low address-space limit the first thing to fail is a command's import of its
    libraries, before its own guard: one line, exit code 1 (issue 60: a traceback before)."""
    from flows import cli

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    class Loading:  # the command line, failing as it imports a command's libraries
        meta = staticmethod(out_of_memory)

    monkeypatch.setattr(cli, "app", Loading)
    monkeypatch.setattr(cli, "product_stdout_only", lambda: None)
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)  # keep this process's own
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: the process ran out of memory")


def test_ctrl_c_wrapped_by_a_library_as_the_command_loads_is_one_line(monkeypatch, capsys):
    """Issue 60's probe: Ctrl-C as Prefect read its settings surfaced as pydantic's
    serialization error wrapping the KeyboardInterrupt: a 20-line traceback and exit code 1."""
    import os
    import signal

    from flows import cli

    def loading(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt as interrupt:  # what a library makes of it
            raise ValueError("Error calling function `_ser_model`: KeyboardInterrupt") from interrupt

    class Loading:
        meta = staticmethod(loading)

    monkeypatch.setattr(cli, "app", Loading)
    monkeypatch.setattr(cli, "product_stdout_only", lambda: None)
    previous = signal.getsignal(signal.SIGINT)
    # Python's own handler, as a fresh ``wadiro`` process has it (a test that ran before in
    # this worker may have left another)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(SystemExit) as ended:
            cli.main()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ended.value.code == 130
    assert capsys.readouterr().err.strip() == "error: interrupted by Ctrl-C (SIGINT)"

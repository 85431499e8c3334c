"""A large fleet's writes are spaced by their own duration (issue 49): a write replaces slices
of tables that grow with the fleet, so a run writes at most every twenty times the last write's
duration (at least ``write_every_s``), and ``write_every_s`` 0 still writes each batch as it
comes back."""

from __future__ import annotations

from tasks.warehouse import pending


def test_writes_are_spaced_twenty_times_the_last_writes_duration():
    writer = pending.RunWriter("w.duckdb", "r", ["gbr"], lock_wait_s=0.1, tell=print)
    assert pending.WRITE_SHARE == 20 and writer.write_every_s == 10
    writer._last_write -= 11
    assert writer._write_due()  # no write yet: every 10 s
    writer._write_s = 1.0  # the last write took a second
    assert not writer._write_due()  # 10 s are up, 20 are not
    writer._last_write -= 10
    assert writer._write_due()
    writer.write_every_s, writer._last_write = 0.0, writer._last_write + 21
    assert writer._write_due()  # 0: each batch as it comes back, however long writes take

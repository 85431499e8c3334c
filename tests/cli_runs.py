"""Helpers of the tests that run ``wadiro`` in this process, as its executable would."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from flows.cli import app


@dataclass(frozen=True)
class Result:
    """A command's exit status, its standard output and error as one text (in the order
    written), and the exception it ended with when that was not an exit."""

    exit_code: int
    output: str
    exception: BaseException | None = None


def invoke(*args: object) -> Result:
    """``wadiro ARGS`` in this process; arguments are passed as strings."""
    written = io.StringIO()
    code, exception = 0, None
    with redirect_stdout(written), redirect_stderr(written):
        try:
            app.meta([str(a) for a in args])
        except SystemExit as end:
            code = end.code if isinstance(end.code, int) else 0 if end.code is None else 1
        except Exception as error:  # noqa: BLE001 -- reported as the result's, as a shell sees it
            code, exception = 1, error
    return Result(code, written.getvalue(), exception)


def one_error_line(result: Result, code: int = 1) -> str:
    """The command's only output line, an ``error: ...`` one, after exit status ``code``."""
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]

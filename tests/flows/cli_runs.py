"""Helpers of the tests that run ``wadiro`` in this process (Typer's runner)."""

from __future__ import annotations

from click.testing import Result
from typer.testing import CliRunner
from wadiro_fleet.flows.cli import app


def invoke(*args: object) -> Result:
    """``wadiro ARGS`` in this process; arguments are passed as strings."""
    return CliRunner().invoke(app, [str(a) for a in args])


def one_error_line(result: Result, code: int = 1) -> str:
    """The command's only output line, an ``error: ...`` one, after exit status ``code``."""
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]

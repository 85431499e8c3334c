"""One definition of a run's settings serves the flows, the command line and the deployments."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner
from wadiro_fleet.flows import cli
from wadiro_fleet.flows.settings import BackfillSettings, RunSettings, WeeklySettings
from wadiro_fleet.tasks.protocol.config import ForecastConfig
from wadiro_fleet.tasks.protocol.config import DEPLOYED_MODELS


def test_the_weekly_run_and_a_backfill_share_the_protocols_defaults():
    weekly, backfill, base = (c().model_dump() for c in (WeeklySettings, BackfillSettings, RunSettings))
    assert weekly == backfill == base
    assert set(base["models"]) == set(DEPLOYED_MODELS)
    assert base["trials"] == 8 and base["tuning"] == "reuse"
    paper = BackfillSettings(protocol="paper").model_dump()
    assert paper["tuning"] == "per-window" and paper["trials"] == 15
    assert "day_type_naive" not in paper["models"] and "gbr" not in paper["models"]
    assert {"gp", "svr", "wadiro_pcscnn"} <= set(paper["models"])


def test_forecast_config_drops_where_and_how_to_run():
    settings = BackfillSettings(trials=3, runner="threads", warehouse="x.duckdb")
    config = settings.forecast_config()
    assert type(config) is ForecastConfig and config.trials == 3
    assert set(config.model_dump()) == set(ForecastConfig.model_fields)


@pytest.fixture
def captured(monkeypatch):
    """Run the commands without running a flow: record the settings they would run with."""
    calls = []

    class Summary:
        run_id, failures = "r", []

        def line(self):
            return "nothing run"

    def fake_flow(**kwargs):
        calls.append(kwargs)
        return Summary()

    monkeypatch.setattr(cli, "_run_flow", lambda flow, **kwargs: fake_flow(**kwargs))
    monkeypatch.setattr(cli, "_report_run", lambda call, warehouse: call())
    return calls


@pytest.mark.parametrize(("command", "cls"), [
    (["forecast"], WeeklySettings),
    (["backfill", "--start", "2024-03-25", "--end", "2024-04-01"], BackfillSettings),
])
def test_command_line_defaults_are_the_settings_defaults(command, cls, captured):
    result = CliRunner().invoke(cli.app, command)
    assert result.exit_code == 0, result.output
    assert captured[0]["settings"] == cls()


def test_every_setting_is_an_option_and_reaches_the_flow(captured):
    result = CliRunner().invoke(cli.app, [
        "forecast", "--week", "2024-04-01", "--models", "svr, gp", "--trials", "3",
        "--tuning", "per-window", "--feature-set", "paper_lags", "--reuse-max-age-weeks", "2",
        "--history-weeks", "6", "--warehouse", "w.duckdb", "--buildings", "a,b",
        "--runner", "dask", "--dask-address", "tcp://h:1", "--workers", "3",
        "--batch-size", "5", "--max-in-flight", "4", "--target", "residual",
        "--target-week-floor", "none", "--certify", "all",
        "--perturbation", "temperature_c=0.5, wind_speed_ms=2",
    ])
    assert result.exit_code == 0, result.output
    settings = captured[0]["settings"]
    assert settings == WeeklySettings(
        models=("svr", "gp"), trials=3, tuning="per-window", feature_set="paper_lags",
        reuse_max_age_weeks=2, history_weeks=6, warehouse="w.duckdb", buildings=("a", "b"),
        runner="dask", dask_address="tcp://h:1", workers=3, batch_size=5, max_in_flight=4,
        target="residual", target_week_floor="none", certify="all",
        perturbation={"temperature_c": 0.5, "wind_speed_ms": 2.0},
    )
    assert str(captured[0]["week"]) == "2024-04-01"
    # every field but the per-model mappings is an option of both commands
    options = ({f"--{name.replace('_', '-')}" for name in RunSettings.model_fields}
               - {"--model-options", "--model-inputs"})
    group = typer.main.get_command(cli.app)
    context = group.make_context("wadiro", ["forecast"], resilient_parsing=True)
    for command in ("forecast", "backfill"):
        flags = {flag for param in group.get_command(context, command).params
                 for flag in param.opts}
        assert options <= flags, command


def test_protocol_paper_sets_the_papers_choices_and_options_still_override(captured):
    result = CliRunner().invoke(cli.app, ["backfill", "--start", "2024-03-25", "--end",
                                          "2024-03-25", "--protocol", "paper"])
    assert result.exit_code == 0, result.output
    paper = captured[0]["settings"]
    assert (paper.feature_set, paper.target, paper.target_week_floor, paper.scnn_tuning,
            paper.certify, paper.warm_start, paper.trials, paper.tuning) == (
        "paper", "load", "none", "separate", "all", False, 15, "per-window")
    assert paper == BackfillSettings(protocol="paper")  # the command line adds nothing
    result = CliRunner().invoke(cli.app, ["backfill", "--start", "2024-03-25", "--end",
                                          "2024-03-25", "--protocol", "paper", "--target",
                                          "residual"])
    assert result.exit_code == 0, result.output
    assert captured[1]["settings"].target == "residual"
    assert captured[1]["settings"].feature_set == "paper"
    deployed = BackfillSettings()
    assert (deployed.feature_set, deployed.target, deployed.persistence,
            deployed.target_week_floor, deployed.scnn_tuning, deployed.certify) == (
        "recent_change", "residual", "day_type", "projection", "joint", "published")

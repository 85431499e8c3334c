"""One definition of a run's settings serves the flows, the command line and the deployments."""

from __future__ import annotations

import re
from contextlib import nullcontext

import pytest

import flows.engine
from flows import cli
from flows.settings import BackfillSettings, RunSettings, WeeklySettings
from tasks.protocol.config import DEPLOYED_MODELS, PROTOCOLS, ForecastConfig
from tests.cli_runs import invoke


def test_the_weekly_run_and_a_backfill_share_the_protocols_defaults():
    weekly, backfill, base = (c().model_dump()
                              for c in (WeeklySettings, BackfillSettings, RunSettings))
    assert weekly == backfill == base
    assert set(base["models"]) == set(DEPLOYED_MODELS)
    assert base["trials"] == 8 and base["tuning"] == "reuse"
    paper = BackfillSettings(protocol="paper").forecast
    assert paper.tuning == "per-window" and paper.trials == 15
    assert "day_type_naive" not in paper.models and "gbr" not in paper.models
    assert {"gp", "svr", "wadiro_pcscnn"} <= set(paper.models)


def test_a_run_holds_its_forecast_config_and_does_not_inherit_it():
    settings = BackfillSettings(trials=3, runner="threads", warehouse="x.duckdb")
    assert type(settings.forecast) is ForecastConfig and settings.forecast.trials == 3
    assert not set(RunSettings.model_fields) & set(ForecastConfig.model_fields)
    # the forecast's fields beside the run's, or in it: one settings object
    assert settings == BackfillSettings(forecast=ForecastConfig(trials=3), runner="threads",
                                        warehouse="x.duckdb")
    assert settings == BackfillSettings(forecast={"trials": 3}, runner="threads",
                                        warehouse="x.duckdb")
    assert BackfillSettings(forecast={"protocol": "paper"}, trials=3).forecast == ForecastConfig(
        protocol="paper", trials=3)
    with pytest.raises(ValueError, match="trials given both in forecast and beside it"):
        BackfillSettings(forecast={"trials": 3}, trials=4)
    with pytest.raises(ValueError, match="nope"):
        BackfillSettings(nope=1)


def test_settings_are_written_and_described_as_one_flat_object():
    """A flow run's parameters and the deployments' schema: the forecast's fields beside the
    run's, as they were before the run held its forecast, read back to the same settings."""
    settings = WeeklySettings(protocol="paper", trials=3, runner="threads", warehouse="w.duckdb")
    written = settings.model_dump(mode="json")
    forecast_fields, run_fields = list(ForecastConfig.model_fields), [
        name for name in RunSettings.model_fields if name != "forecast"]
    assert list(written) == forecast_fields + run_fields
    assert written["trials"] == 3 and written["tuning"] == "per-window"
    assert WeeklySettings.model_validate(written) == settings
    assert WeeklySettings.model_validate_json(settings.model_dump_json()) == settings
    schema = WeeklySettings.model_json_schema()
    assert list(schema["properties"]) == forecast_fields + run_fields
    assert schema["additionalProperties"] is False  # a misspelt field is refused at once


def test_the_protocols_are_preset_configurations():
    assert PROTOCOLS["deployed"] == ForecastConfig()
    assert PROTOCOLS["paper"] == ForecastConfig(protocol="paper")
    # the paper's preset differs from the deployed one in exactly the protocol's fields
    differ = {name for name in ForecastConfig.model_fields
              if getattr(PROTOCOLS["paper"], name) != getattr(PROTOCOLS["deployed"], name)}
    assert differ == {"protocol", *ForecastConfig.PROTOCOL_DEFAULTS}
    # a field given overrides the preset's value and no other
    changed = ForecastConfig(protocol="paper", trials=3)
    assert changed == PROTOCOLS["paper"].model_copy(update={"trials": 3})


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

    monkeypatch.setattr(flows.engine, "run_flow", lambda flow, **kwargs: fake_flow(**kwargs))
    monkeypatch.setattr(cli, "run_report", lambda warehouse: nullcontext(cli.RunReport()))
    return calls


@pytest.mark.parametrize(("command", "cls"), [
    (["forecast"], WeeklySettings),
    (["backfill", "--start", "2024-03-25", "--end", "2024-04-01"], BackfillSettings),
])
def test_command_line_defaults_are_the_settings_defaults(command, cls, captured):
    result = invoke(*command)
    assert result.exit_code == 0, result.output
    assert captured[0]["settings"] == cls()


def test_every_setting_is_an_option_and_reaches_the_flow(captured):
    result = invoke(
        "forecast", "--week", "2024-04-01", "--models", "svr, gp", "--trials", "3",
        "--tuning", "per-window", "--feature-set", "paper_lags", "--reuse-max-age-weeks", "2",
        "--history-weeks", "6", "--warehouse", "w.duckdb", "--buildings", "a,b",
        "--runner", "dask", "--dask-address", "tcp://h:1", "--workers", "3",
        "--batch-size", "5", "--max-in-flight", "4", "--target", "residual",
        "--target-week-floor", "none", "--certify", "all",
        "--perturbation.temperature_c", "0.5", "--perturbation.wind_speed_ms", "2",
    )
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
    # every field but the per-model mappings is an option of both commands, named as the field
    fields = set(RunSettings.model_fields) - {"forecast"} | set(ForecastConfig.model_fields)
    options = {f"--{name.replace('_', '-')}" for name in fields}
    mappings = {"--model-options", "--model-inputs"}
    for command in (["forecast"], ["backfill", "--start", "2024-03-25", "--end", "2024-03-25"]):
        page = invoke(*command, "--help")
        assert page.exit_code == 0, page.output
        shown = set(re.findall(r"--[a-z][a-z-]*", page.output))
        assert options - mappings <= shown and not shown & mappings, command[0]
        unwrapped = " ".join(page.output.replace("│", " ").split())
        # defaults shown as they are typed: lists comma-separated, mappings as NAME=VALUE
        assert "[default: 12-24..01-01]" in unwrapped and "[default: temperature_c=1.0," in (
            unwrapped), unwrapped
        refused = invoke(*command, "--model-options.gbr.max_iter", "5")
        assert refused.exit_code == 2 and "Unknown option" in refused.output, refused.output


def test_option_values_are_checked_by_the_settings_and_named_by_their_option(captured):
    for args, message in [
            (["--trials", "0"], "--trials: Input should be greater than or equal to 1"),
            (["--models", "svr,nope"], "--models: unknown model(s) ['nope']"),
            (["--buildings", " , "], "--buildings: the list is empty; leave the option out"),
            (["--runner", "dask"], "settings: the dask runner needs dask_address"),
            (["--week", "05/06/2024"], "--week"),
            (["--runner", "cloud"], "--runner")]:
        result = invoke("forecast", *args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert message in lines[0], (message, lines[0])
    assert not captured


def test_protocol_paper_sets_the_papers_choices_and_options_still_override(captured):
    result = invoke("backfill", "--start", "2024-03-25", "--end", "2024-03-25", "--protocol",
                    "paper")
    assert result.exit_code == 0, result.output
    paper = captured[0]["settings"].forecast
    assert (paper.feature_set, paper.target, paper.target_week_floor, paper.scnn_tuning,
            paper.certify, paper.warm_start, paper.trials, paper.tuning) == (
        "paper", "load", "none", "separate", "all", False, 15, "per-window")
    assert paper == BackfillSettings(protocol="paper").forecast  # the command line adds nothing
    result = invoke("backfill", "--start", "2024-03-25", "--end", "2024-03-25", "--protocol",
                    "paper", "--target", "residual")
    assert result.exit_code == 0, result.output
    assert captured[1]["settings"].forecast.target == "residual"
    assert captured[1]["settings"].forecast.feature_set == "paper"
    deployed = BackfillSettings().forecast
    assert (deployed.feature_set, deployed.target, deployed.persistence,
            deployed.target_week_floor, deployed.scnn_tuning, deployed.certify) == (
        "recent_change", "residual", "day_type", "projection", "joint", "published")

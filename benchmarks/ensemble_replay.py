"""The published combination replayed under other settings, on a ``forecast_quality.py`` run.

A run of the quality benchmark with ``--pickle`` keeps every model's forecast of every
building-week with the actuals. This script combines those forecasts again, week by week and
building by building with the record each week had (the members' scores in the building's
earlier weeks of the same run, its warm-up weeks included), as
:func:`tasks.protocol.forecasting.ensemble_weights` does, under each variant asked for: the
weights' power, the record's length, the members (any model of the run, a peer included), and
whether each member's validation week counts as one more week of its record. No model is fitted
again, so a variant of the combination is measured on a year of 20 buildings in a minute instead
of the hour a run takes. The first variant, ``deployed``, is the run's own settings; its replay
must give the run's ensemble to the digit (printed, as a check of the replay itself).

    python benchmarks/forecast_quality.py --years 2017 --buildings auto 20 --mode both \\
        --pickle /tmp/q2017.pkl
    python benchmarks/ensemble_replay.py /tmp/q2017.pkl
    python benchmarks/ensemble_replay.py /tmp/q2017.pkl --variant "p2: power=2" \\
        --variant "lgbm: members=gbr,gbr_lags,wadiro_pcscnn,wadiro_linreg,lgbm_reference_52w"

Each line prints, per year and mode, the combination's MAE relative to seasonal naive's (summed
over the building-weeks both have, as ``forecast_quality.py`` sums) and its ratio to the best
single model of the run.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from forecast_quality import COMBINATIONS, PEERS, PUBLISHED

from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import combine_members, ensemble_weights
from tasks.protocol.models import ENSEMBLE, SEASONAL_NAIVE
from tasks.protocol.track_record import TrackRecord, WeekScore, track_ratio


@dataclass(frozen=True)
class Variant:
    """A combination's settings: the deployed ones unless named."""

    name: str
    power: float | None = None
    record_weeks: int | None = None
    members: tuple[str, ...] | None = None
    validation: bool = False
    """Each member's validation week is one more week of its record (as the publication step
    counts it); with fewer than two recorded weeks, the validation week alone weighs it."""


DEFAULT_VARIANTS = (
    Variant("power 2", power=2), Variant("power 8", power=8),
    Variant("record 4 weeks", record_weeks=4), Variant("record 12 weeks", record_weeks=12),
    Variant("validation week in the record", validation=True),
    Variant("without wadiro_linreg", members=("gbr", "gbr_lags", "wadiro_pcscnn")),
    Variant("with lgbm_reference_52w", members=(
        "gbr", "gbr_lags", "wadiro_pcscnn", "wadiro_linreg", "lgbm_reference_52w")),
)


def parse_variant(text: str) -> Variant:
    """``"NAME: power=2; record=4; members=a,b; validation"`` -> :class:`Variant`."""
    name, _, spec = text.partition(":")
    fields: dict[str, object] = {}
    for item in (part.strip() for part in spec.split(";") if part.strip()):
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "power":
            fields["power"] = float(value)
        elif key == "record":
            fields["record_weeks"] = int(value)
        elif key == "members":
            fields["members"] = tuple(v.strip() for v in value.split(",") if v.strip())
        elif key == "validation":
            fields["validation"] = True
        else:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected power=P; record=WEEKS; members=A,B,...; validation")
    return Variant(name.strip(), **fields)


def _config(variant: Variant, deployed: ForecastConfig) -> ForecastConfig:
    update: dict[str, object] = {}
    if variant.power is not None:
        update["ensemble_power"] = variant.power
    if variant.record_weeks is not None:
        update["ensemble_record_weeks"] = variant.record_weeks
    return deployed.model_copy(update=update)


def _weights(members: Sequence[str], record: TrackRecord, week: Mapping[str, pd.Series],
             variant: Variant, config: ForecastConfig) -> np.ndarray:
    """The product's weights, or with ``variant.validation`` the validation week joined."""
    if not variant.validation:
        return ensemble_weights(members, record, config)
    naive_validation = week[SEASONAL_NAIVE]["validation_mae"]
    ratios = []
    for member in members:
        track = track_ratio(member, record, config.ensemble_record_weeks)
        validation = week[member].get("validation_mae")
        if validation is None or not np.isfinite(validation) or not naive_validation:
            ratios.append(track[0] if track is not None else 1.0)
            continue
        mean, n = track if track is not None else (0.0, 0)
        ratios.append((mean * n + validation / naive_validation) / (n + 1))
    weights = np.maximum(np.asarray(ratios), 1e-3) ** -config.ensemble_power
    return weights / weights.sum()


def combined_mae(forecasts: np.ndarray, weights: np.ndarray, actual: np.ndarray,
                 method: str) -> float:
    """MAE over the scored hours of the product's combination of ``forecasts`` (members x
    hours), clipped at zero as the product clips it."""
    combined = np.fmax(combine_members(forecasts, weights, method), 0.0)
    scored = np.isfinite(actual) & np.isfinite(combined)
    return float(np.mean(np.abs(combined[scored] - actual[scored])))


def _replayed_week(models: Mapping[str, pd.Series], record: TrackRecord,
                   variants: Sequence[Variant], configs: Mapping[str, ForecastConfig],
                   deployed: ForecastConfig) -> dict[str, float]:
    """One building-week: the run's ensemble's MAE and each variant's, and the single models'."""
    line = {"naive": models[SEASONAL_NAIVE]["mae"],
            "as run": models[ENSEMBLE]["mae"] if ENSEMBLE in models else np.nan}
    actual = np.asarray(models[SEASONAL_NAIVE]["actual"], dtype=float)
    for variant in variants:
        members = [m for m in variant.members or deployed.members if m in models and (
            m in PEERS or isinstance(models[m].get("validation_errors"), pd.Series))]
        if ENSEMBLE not in models or len(members) < 2:
            line[variant.name] = line["as run"]  # no combination that week, as run
            continue
        config = configs[variant.name]
        line[variant.name] = combined_mae(
            np.vstack([np.asarray(models[m]["y_hat"], dtype=float) for m in members]),
            _weights(members, record, models, variant, config), actual, config.ensemble_method)
    line.update({f"single {m}": r["mae"] for m, r in models.items()
                 if m not in (*PEERS, *COMBINATIONS)})
    return line


def replay(rows: pd.DataFrame, variants: Sequence[Variant],
           deployed: ForecastConfig) -> pd.DataFrame:
    """Per building-week: seasonal naive's MAE, the run's ensemble's and each variant's."""
    out = []
    configs = {v.name: _config(v, deployed) for v in variants}
    for (year, mode, _, building_id), building in rows.groupby(
            ["year", "mode", "phase", "building_id"]):
        record: dict[date, dict[str, WeekScore]] = {}
        for week, frame in building.groupby("week", sort=True):
            models = {m: r for m, r in frame.set_index("model").iterrows()
                      if m != PUBLISHED and np.isfinite(r["mae"])}
            if SEASONAL_NAIVE not in models:
                continue
            if not ("warm_up" in frame and frame["warm_up"].iloc[0]):  # warm-up: record only
                out.append({"year": year, "mode": mode, "week": week,
                            "building_id": building_id,
                            **_replayed_week(models, record, variants, configs, deployed)})
            record[week] = {m: WeekScore(float(r["mae"])) for m, r in models.items()}
    return pd.DataFrame(out)


def summary(lines: pd.DataFrame, variants: Sequence[Variant]) -> pd.DataFrame:
    """Per year and mode: each variant's MAE relative to seasonal naive, and to the best single
    model's."""
    table = {}
    for (year, mode), frame in lines.groupby(["year", "mode"]):
        naive = frame["naive"].sum()
        singles = frame[[c for c in frame if c.startswith("single ")]].sum() / naive
        best = singles.min()
        column = {"best single model": f"{singles.idxmin().removeprefix('single ')} "
                                       f"{best:.3f}"}
        for name in ["as run", *(v.name for v in variants)]:
            ratio = frame[name].sum() / naive
            column[name] = f"{ratio:.3f} ({ratio / best:.3f})"
        table[f"{year} {mode}"] = column
    return pd.DataFrame(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pickle", type=Path, help="forecast_quality.py --pickle's file")
    parser.add_argument("--variant", action="append", type=parse_variant, default=[],
                        metavar="'NAME: power=P; record=WEEKS; members=A,B; validation'",
                        help="a setting of the combination to replay (repeatable; default: the "
                        "decision log's)")
    args = parser.parse_args()
    rows = pd.read_pickle(args.pickle)["rows"]
    if "actual" not in rows:
        parser.error(f"{args.pickle} holds no actuals: made before forecast_quality.py kept "
                     "them; run it again")
    deployed = ForecastConfig()
    variants = [Variant("deployed"), *(args.variant or DEFAULT_VARIANTS)]
    lines = replay(rows, variants, deployed)
    same = np.isclose(lines["deployed"], lines["as run"], rtol=0, atol=1e-6, equal_nan=True)
    gap = (lines["deployed"] - lines["as run"]).abs().max()
    print(f"{len(lines)} building-weeks; the deployed settings replayed give the run's ensemble "
          f"on {same.sum()} of them to 1e-6 kWh (largest difference {gap:.2g} kWh)")
    print("MAE / seasonal naive's (/ the best single model's):")
    print(summary(lines, variants).to_string())


if __name__ == "__main__":
    main()

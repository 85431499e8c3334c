"""The published combination replayed under other settings, on a ``forecast_quality.py`` run.

A run of the quality benchmark with ``--pickle`` keeps every model's forecast of every
building-week with the actuals. This script combines those forecasts again, week by week and
building by building with the record each week had (the members' scores in the building's
earlier weeks of the same run, its warm-up weeks included), as
:func:`tasks.protocol.forecasting.ensemble_weights` does, under each variant asked for: the
weights' power, the record's length, the members (any model of the run, a peer included, or a
model joined from another run of the same building-weeks), whether each member's validation week
counts as one more week of its record, and weights fitted on the record's hours instead of its
weekly scores (``stacked``). No model is fitted again, so a variant of the combination is
measured on a year of 20 buildings in seconds instead of the hour a run takes (a stacked one in
about two minutes: a linear program a building-week). The first
variant, ``deployed``, is the run's own settings; its replay must give the run's ensemble to the
digit (printed, as a check of the replay itself).

    python benchmarks/forecast_quality.py --years 2017 --buildings auto 20 --mode both \\
        --pickle /tmp/q2017.pkl
    python benchmarks/ensemble_replay.py /tmp/q2017.pkl
    python benchmarks/ensemble_replay.py /tmp/q2017.pkl --variant "p2: power=2" \\
        --variant "lgbm: members=gbr,gbr_lags,wadiro_pcscnn,wadiro_linreg,lgbm_reference_52w"

A variant of one member is run alone and joined under a name of its own (here the linear
regression on a year of history, as a fifth member):

    python benchmarks/forecast_quality.py --years 2017 --buildings auto 20 --mode both \\
        --models seasonal_naive,wadiro_linreg \\
        --set 'model_inputs={"wadiro_linreg": {"history_weeks": 52}}' --pickle /tmp/lin52.pkl
    python benchmarks/ensemble_replay.py /tmp/q2017.pkl \\
        --join /tmp/lin52.pkl:wadiro_linreg=linreg52 \\
        --variant "lin52: members=gbr,gbr_lags,wadiro_pcscnn,wadiro_linreg,linreg52"

Each line prints, per year and mode, the combination's MAE relative to seasonal naive's (summed
over the building-weeks both have, as ``forecast_quality.py`` sums) and its ratio to the best
single model of the run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from forecast_quality import COMBINATIONS, PEERS, PUBLISHED
from scipy import sparse
from scipy.optimize import linprog

from tasks.protocol.config import ForecastConfig
from tasks.protocol.forecasting import combine_members, ensemble_weights, inverse_error_weights
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
    stacked: float = 0.0
    """The share of the weights fitted on the record's hours (:func:`stacked_weights`: the
    least absolute error of the combination over the building's last record weeks); the rest
    are the deployed weights. With fewer than two recorded weeks, the deployed weights."""


DEFAULT_VARIANTS = (
    Variant("power 2", power=2), Variant("power 8", power=8),
    Variant("record 4 weeks", record_weeks=4), Variant("record 12 weeks", record_weeks=12),
    Variant("validation week in the record", validation=True),
    Variant("without wadiro_linreg", members=("gbr", "gbr_lags", "wadiro_pcscnn")),
    Variant("with lgbm_reference_52w", members=(
        "gbr", "gbr_lags", "wadiro_pcscnn", "wadiro_linreg", "lgbm_reference_52w")),
    Variant("with day_type_naive", members=(
        "gbr", "gbr_lags", "wadiro_pcscnn", "wadiro_linreg", "day_type_naive")),
    Variant("stacked on the record's hours", stacked=1.0),
    Variant("half stacked", stacked=0.5),
)


def parse_variant(text: str) -> Variant:
    """``"NAME: power=2; record=4; members=a,b; validation; stacked=S"`` -> :class:`Variant`."""
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
        elif key == "stacked":
            share = float(value) if value.strip() else 1.0
            if not 0.0 < share <= 1.0:
                raise argparse.ArgumentTypeError(f"{item!r}: the stacked share is in (0, 1]")
            fields["stacked"] = share
        else:
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected power=P; record=WEEKS; members=A,B,...; validation; "
                "stacked=SHARE")
    return Variant(name.strip(), **fields)


def _config(variant: Variant, deployed: ForecastConfig) -> ForecastConfig:
    update: dict[str, object] = {}
    if variant.power is not None:
        update["ensemble_power"] = variant.power
    if variant.record_weeks is not None:
        update["ensemble_record_weeks"] = variant.record_weeks
    return deployed.model_copy(update=update)


def stacked_weights(forecasts: np.ndarray, actual: np.ndarray) -> np.ndarray | None:
    """The weights (non-negative, summing to 1) whose combination of ``forecasts`` (hours x
    members) has the least absolute error against ``actual``: a linear program (an error
    bound per hour), or ``None`` when it has no solution."""
    hours, members = forecasts.shape
    identity = sparse.identity(hours, format="csr")
    bounds = sparse.vstack([sparse.hstack([-sparse.csr_matrix(forecasts), -identity]),
                            sparse.hstack([sparse.csr_matrix(forecasts), -identity])])
    result = linprog(np.r_[np.zeros(members), np.ones(hours)], A_ub=bounds,
                     b_ub=np.r_[-actual, actual], A_eq=np.r_[np.ones(members),
                                                            np.zeros(hours)][None, :],
                     b_eq=[1.0], bounds=(0, None), method="highs")
    if result.status != 0:
        return None
    weights = np.maximum(result.x[:members], 0.0)
    return weights / weights.sum()


def _fitted_weights(members: Sequence[str], record_weeks: int,
                    hours: Mapping[date, Mapping[str, np.ndarray]]) -> np.ndarray | None:
    """:func:`stacked_weights` over the last ``record_weeks`` weeks of ``hours`` (each week's
    forecasts by model and its actuals, under ``"actual"``) that every member forecast; None
    with fewer than two such weeks or no solution."""
    recent = [hours[w] for w in sorted(hours)[-record_weeks:]
              if all(m in hours[w] and len(hours[w][m]) == len(hours[w]["actual"])
                     for m in members)]
    if len(recent) < 2:
        return None
    forecasts = np.vstack([np.column_stack([w[m] for m in members]) for w in recent])
    actual = np.concatenate([w["actual"] for w in recent])
    scored = np.isfinite(forecasts).all(axis=1) & np.isfinite(actual)
    return stacked_weights(forecasts[scored], actual[scored])


def _weights(members: Sequence[str], record: TrackRecord, week: Mapping[str, pd.Series],
             variant: Variant, config: ForecastConfig,
             fitted: Callable[[tuple[str, ...], int], np.ndarray | None]) -> np.ndarray:
    """The product's weights, with ``variant.validation`` the validation week joined, and with
    ``variant.stacked`` that share ``fitted`` on the record's hours (the deployed weights
    where they cannot be)."""
    deployed = _record_weights(members, record, week, variant, config)
    if not variant.stacked:
        return deployed
    weights = fitted(tuple(members), config.ensemble_record_weeks)
    if weights is None:
        return deployed
    return variant.stacked * weights + (1.0 - variant.stacked) * deployed


def _record_weights(members: Sequence[str], record: TrackRecord,
                    week: Mapping[str, pd.Series], variant: Variant,
                    config: ForecastConfig) -> np.ndarray:
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
    return inverse_error_weights(ratios, config.ensemble_power)


def combined_mae(forecasts: np.ndarray, weights: np.ndarray, actual: np.ndarray,
                 method: str) -> float:
    """MAE over the scored hours of the product's combination of ``forecasts`` (members x
    hours), clipped at zero as the product clips it."""
    combined = np.fmax(combine_members(forecasts, weights, method), 0.0)
    scored = np.isfinite(actual) & np.isfinite(combined)
    return float(np.mean(np.abs(combined[scored] - actual[scored])))


def _replayed_week(models: Mapping[str, pd.Series], actual: np.ndarray, record: TrackRecord,
                   hours: Mapping[date, Mapping[str, np.ndarray]],
                   variants: Sequence[Variant], configs: Mapping[str, ForecastConfig],
                   deployed: ForecastConfig) -> dict[str, float]:
    """One building-week: the run's ensemble's MAE and each variant's, and the single models'.
    Variants stacked on the same members and record length share one fit of the weeks'
    ``hours``."""
    line = {"naive": models[SEASONAL_NAIVE]["mae"],
            "as run": models[ENSEMBLE]["mae"] if ENSEMBLE in models else np.nan}
    fits: dict[tuple[tuple[str, ...], int], np.ndarray | None] = {}

    def fitted(members: tuple[str, ...], record_weeks: int) -> np.ndarray | None:
        if (members, record_weeks) not in fits:
            fits[members, record_weeks] = _fitted_weights(members, record_weeks, hours)
        return fits[members, record_weeks]

    for variant in variants:
        members = [m for m in variant.members or deployed.members if m in models and (
            m in PEERS or isinstance(models[m].get("validation_errors"), pd.Series))]
        if ENSEMBLE not in models or len(members) < 2:
            line[variant.name] = line["as run"]  # no combination that week, as run
            continue
        config = configs[variant.name]
        line[variant.name] = combined_mae(
            np.vstack([np.asarray(models[m]["y_hat"], dtype=float) for m in members]),
            _weights(members, record, models, variant, config, fitted), actual,
            config.ensemble_method)
    line.update({f"single {m}": r["mae"] for m, r in models.items()
                 if m not in (*PEERS, *COMBINATIONS)})
    return line


def replay(rows: pd.DataFrame, variants: Sequence[Variant],
           deployed: ForecastConfig) -> pd.DataFrame:
    """Per building-week: seasonal naive's MAE, the run's ensemble's and each variant's."""
    out = []
    configs = {v.name: _config(v, deployed) for v in variants}
    stacking = any(v.stacked for v in variants)
    for (year, mode, _, building_id), building in rows.groupby(
            ["year", "mode", "phase", "building_id"]):
        record: dict[date, dict[str, WeekScore]] = {}
        hours: dict[date, dict[str, np.ndarray]] = {}
        for week, frame in building.groupby("week", sort=True):
            models = {m: r for m, r in frame.set_index("model").iterrows()
                      if m != PUBLISHED and np.isfinite(r["mae"])}
            if SEASONAL_NAIVE not in models:
                continue
            actual = np.asarray(models[SEASONAL_NAIVE]["actual"], dtype=float)
            if not ("warm_up" in frame and frame["warm_up"].iloc[0]):  # warm-up: record only
                out.append({"year": year, "mode": mode, "week": week,
                            "building_id": building_id,
                            **_replayed_week(models, actual, record, hours, variants,
                                             configs, deployed)})
            record[week] = {m: WeekScore(float(r["mae"])) for m, r in models.items()}
            if stacking:
                hours[week] = {"actual": actual,
                               **{m: np.asarray(r["y_hat"], float) for m, r in models.items()}}
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


KEYS = ["year", "mode", "phase", "building_id", "week"]
"""What names a building-week in a run's rows."""


def join_model(rows: pd.DataFrame, other: pd.DataFrame, model: str, name: str) -> pd.DataFrame:
    """``rows`` with ``other``'s rows of ``model`` (another run of the same building-weeks)
    added under ``name``, on the building-weeks ``rows`` has; a joined model is one more single
    model of the run."""
    if name in set(rows["model"]):
        raise ValueError(f"the run already has a model named {name!r}")
    joined = other[other["model"] == model]
    if joined.empty:
        raise ValueError(f"the other run has no model {model!r}")
    if joined.duplicated(KEYS).any():
        raise ValueError(f"the other run has {model!r} twice for a building-week")
    joined = joined.merge(rows[KEYS].drop_duplicates(), on=KEYS).assign(model=name)
    return pd.concat([rows, joined], ignore_index=True)


def _join_spec(text: str) -> tuple[Path, str, str]:
    path, _, spec = text.rpartition(":")
    model, _, name = spec.partition("=")
    if not path or not model.strip() or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected PICKLE:MODEL=NAME")
    return Path(path), model.strip(), name.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pickle", type=Path, help="forecast_quality.py --pickle's file")
    parser.add_argument("--variant", action="append", type=parse_variant, default=[],
                        metavar="'NAME: power=P; record=WEEKS; members=A,B; validation; "
                        "stacked=SHARE'",
                        help="a setting of the combination to replay (repeatable; default: the "
                        "decision log's)")
    parser.add_argument("--join", action="append", type=_join_spec, default=[],
                        metavar="PICKLE:MODEL=NAME",
                        help="add MODEL's forecasts from another --pickle run of the same "
                        "building-weeks as the model NAME (repeatable)")
    args = parser.parse_args()
    rows = pd.read_pickle(args.pickle)["rows"]
    if "actual" not in rows:
        parser.error(f"{args.pickle} holds no actuals: made before forecast_quality.py kept "
                     "them; run it again")
    for path, model, name in args.join:
        try:
            rows = join_model(rows, pd.read_pickle(path)["rows"], model, name)
        except ValueError as error:
            parser.error(f"--join {path}: {error}")
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

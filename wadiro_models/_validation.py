"""Input validation shared by the estimators: scikit-learn's checks, typed errors, and the
scikit-learn tags that state what those checks accept."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.utils import Tags, get_tags
from sklearn.utils.validation import check_X_y, validate_data

from .exceptions import InsufficientDataError, InvalidInputError

MIN_SAMPLES = 2


def fit_data(estimator: object, X: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 (X, y) for ``fit``; sets ``n_features_in_`` on the estimator.

    NaN/inf (in X: inf, and NaN unless the estimator's tags allow it), mismatched lengths,
    non-numeric data and fewer than ``MIN_SAMPLES`` rows raise :class:`InvalidInputError` /
    :class:`InsufficientDataError` with the cause in the message.
    """
    return _checked(lambda: validate_data(estimator, X, y, dtype=np.float64, y_numeric=True,
                                          ensure_all_finite=_finite(estimator)))


def _finite(estimator: object) -> bool | str:
    """What the estimator's X must be (``ensure_all_finite``): NaN passes only where its tags
    say it takes missing inputs (:func:`validated_data_tags`)."""
    return "allow-nan" if get_tags(estimator).input_tags.allow_nan else True


def training_data(estimator: object, X: object, y: object) -> tuple[np.ndarray, np.ndarray]:
    """The (X, y) of :func:`fit_data`, without recording anything on the estimator."""
    return _checked(lambda: check_X_y(X, y, dtype=np.float64, y_numeric=True, estimator=estimator))


def _checked(
    validate: Callable[[], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    try:
        X, y = validate()
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from exc
    if X.shape[0] < MIN_SAMPLES:
        raise InsufficientDataError(
            f"got n_samples={X.shape[0]}; at least {MIN_SAMPLES} samples are required"
        )
    return X, y


def validated_data_tags(tags: Tags, *, allow_nan: bool = False) -> Tags:
    """``tags`` set to what :func:`fit_data` and :func:`predict_data` accept: a dense,
    finite, numeric 2-D X (no sparse matrix, values of any sign; NaN only with ``allow_nan``)
    and a required target of one numeric column (of any sign)."""
    tags.input_tags.two_d_array = True
    tags.input_tags.one_d_array = False
    tags.input_tags.sparse = False
    tags.input_tags.allow_nan = allow_nan
    tags.input_tags.positive_only = False
    tags.target_tags.required = True
    tags.target_tags.single_output = True
    tags.target_tags.multi_output = False
    tags.target_tags.positive_only = False
    return tags


def predict_data(estimator: object, X: object) -> np.ndarray:
    """Validated float64 X for ``predict`` (feature count checked against ``fit``; NaN only
    where the estimator's tags allow it)."""
    try:
        return validate_data(estimator, X, dtype=np.float64, reset=False,
                             ensure_all_finite=_finite(estimator))
    except InvalidInputError:
        raise
    except ValueError as exc:
        raise InvalidInputError(str(exc)) from exc

"""Input validation shared by the estimators: scikit-learn's checks, typed errors, the
scikit-learn tags that state what those checks accept, and the estimators' common base that
applies them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Self

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils import Tags, get_tags
from sklearn.utils.validation import check_is_fitted, check_X_y, validate_data

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
    say it takes missing inputs (:class:`Regressor`'s ``_allow_nan``)."""
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


def parameter(default: object, constraints: list) -> Any:
    """A parameter of an :func:`estimator_parameters` class: its default and the constraints
    (scikit-learn's ``_parameter_constraints`` entry) that ``fit`` validates it against."""
    return field(default=default, metadata={"constraints": constraints})


def estimator_parameters(cls: type) -> type:
    """Class decorator of the estimators: the class attributes annotated and set by
    :func:`parameter` are the keyword-only parameters that the generated ``__init__`` stores,
    and it does nothing else (scikit-learn's convention); equality and ``repr`` stay
    scikit-learn's, and their constraints are ``_parameter_constraints``."""
    cls = dataclass(kw_only=True, eq=False, repr=False)(cls)
    cls._parameter_constraints = {f.name: f.metadata["constraints"] for f in fields(cls)}
    return cls


FITTED_ATTRIBUTES_DOC = """\
    fit_time_ : float
        Seconds spent in ``fit``.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during ``fit``; defined only when X has feature names that
        are all strings.
"""
"""The last entries of every estimator's Attributes section: what :class:`Regressor` sets."""


class Regressor(RegressorMixin, BaseEstimator):
    """Base of the estimators: ``fit`` validates (X, y) with :func:`fit_data`, fits them
    (``_fit``) and records ``fit_time_``; ``predict`` validates X with :func:`predict_data`
    and predicts (``_predict``, the linear model ``X @ coef_ + intercept_`` unless overridden).
    The tags state what those checks accept (``_allow_nan``: whether X may hold NaN)."""

    _allow_nan = False

    def __sklearn_tags__(self) -> Tags:
        """What :func:`fit_data` and :func:`predict_data` accept: a dense, finite, numeric 2-D
        X (no sparse matrix, values of any sign; NaN only with ``_allow_nan``) and a required
        target of one numeric column (of any sign)."""
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = True
        tags.input_tags.one_d_array = False
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = self._allow_nan
        tags.input_tags.positive_only = False
        tags.target_tags.required = True
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        tags.target_tags.positive_only = False
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: object, y: object) -> Self:
        return self._timed_fit(X, y)

    def _timed_fit(self, X: object, y: object, **fit_params: object) -> Self:
        """``_fit(X, y, **fit_params)`` on the validated data, timed. A warning that ``_fit``
        raises for the caller of ``fit`` is 5 frames above ``_fit`` (``_fit``, this method,
        ``fit``, ``_fit_context``'s wrapper, the caller)."""
        started = time.perf_counter()
        self._fit(*fit_data(self, X, y), **fit_params)
        self.fit_time_ = time.perf_counter() - started
        return self

    def predict(self, X: object) -> np.ndarray:
        check_is_fitted(self)
        return self._predict(predict_data(self, X))

    def _predict(self, X: np.ndarray) -> np.ndarray:
        return X @ self.coef_ + self.intercept_

import numpy as np
import pytest

from tasks.protocol.scoring import count_violations, score_forecast


def test_scores_by_hand():
    y = np.array([10.0, np.nan, 4.0, 0.5])
    y_hat = np.array([12.0, 3.0, 1.0, -0.25])
    s = score_forecast(y, y_hat, train_prediction=np.array([-1.0, 0.0, 2.0]))
    # scored hours: 0, 2, 3 -> errors 2, -3, -0.75
    assert s.n_hours == 3
    assert s.mae == pytest.approx((2 + 3 + 0.75) / 3)
    assert s.rmse == pytest.approx(np.sqrt((4 + 9 + 0.5625) / 3))
    assert s.mean_actual == pytest.approx((10 + 4 + 0.5) / 3)
    assert s.n_violations == 1  # the -0.25 forecast, even though hour 1 has no actual
    assert s.n_train_violations == 1


def test_missing_actuals_are_never_zero():
    s = score_forecast(np.array([np.nan, np.nan]), np.array([1.0, 2.0]))
    assert s.n_hours == 0 and s.mae is None and s.rmse is None


def test_violation_tolerance_absorbs_round_off_only():
    assert count_violations(np.array([-1e-9, 0.0, 5.0, np.nan])) == 0
    assert count_violations(np.array([-1e-3])) == 1


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        score_forecast(np.zeros(3), np.zeros(4))

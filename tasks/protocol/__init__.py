"""The forecasting protocol for one (building, week): weeks, features, windows, models, tuning,
scoring. Pure: it never opens the warehouse or talks to Prefect."""

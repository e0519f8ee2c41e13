"""Measuring: the timer (events, graphs, queued, host), calibration, node gap, device and peaks,
profile and tolerances. Imports only core."""

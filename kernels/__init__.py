"""Reference kernel suite for pytest-gpuperf (repo-only; reached through pytest's `pythonpath`)."""

"""Plain records and rules: typed results, verdicts, units, timing versions. Standard library only."""

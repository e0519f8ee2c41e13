"""Runs the `gpuperf` command in-process for the CLI tests."""
from __future__ import annotations

from pytest_gpuperf import cli


def run(argv, capsys):
    """`gpuperf ARGV`: (exit code, stdout, stderr), asserting no traceback was printed."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err

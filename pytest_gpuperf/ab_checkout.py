"""Where `gpuperf ab`'s two sides run: BASE checked out with `git worktree` into a temporary folder,
the pytest arguments made fit for both checkouts, and the folder the rounds' files go to."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

#: Options `gpuperf ab` gives each round itself; among the pytest arguments they are refused.
OWN_OPTIONS = ("--gpuperf-save", "--gpuperf-json", "--gpuperf-markdown", "--gpuperf-ab-plan", "--gpuperf-no-compare",
               "--gpuperf-baseline-dir")


class AbError(Exception):
    """Bad input or a side that could not be measured: one line, exit status 2. Every `gpuperf ab`
    module raises it; it lives here, the lowest of them, as the checkout raises it first."""


def git(args: Sequence[str], cwd: Path) -> str:
    """Run git, returning its stdout; AbError with git's own message when it fails."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise AbError("gpuperf ab needs the git command on PATH") from None
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        raise AbError(f"git {' '.join(args)}: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc.stdout.strip()


@contextlib.contextmanager
def base_checkout(repo: Path, revision: str) -> Iterator[tuple[Path, str]]:
    """A detached worktree of `revision`, removed afterwards; yields (its root, the commit)."""
    try:
        commit = git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], repo)
    except AbError:
        raise AbError(f"BASE {revision!r} is not a commit of the repository at {repo}") from None
    holder = Path(tempfile.mkdtemp(prefix="gpuperf-ab-"))
    root = holder / "base"
    try:
        git(["worktree", "add", "--detach", "--quiet", str(root), commit], repo)
        yield root, commit
    finally:
        with contextlib.suppress(AbError):
            git(["worktree", "remove", "--force", str(root)], repo)
        shutil.rmtree(holder, ignore_errors=True)
        with contextlib.suppress(AbError):
            git(["worktree", "prune"], repo)


#: Options naming a folder both sides share: made absolute, or the base's would be in its temporary checkout.
SHARED_FOLDERS = ("--gpuperf-compile-cache",)


def pytest_args_for(args: Sequence[str], repo: Path, cwd: Path) -> list[str]:
    """The pytest arguments both sides can take: a path inside the repository is made relative to
    `cwd`, so the base side reads its own checkout's file; a SHARED_FOLDERS folder is made absolute.
    Options `gpuperf ab` sets are refused."""
    out = []
    folder_next = False
    for arg in args:
        option, equals, value = arg.partition("=")
        if folder_next or (option in SHARED_FOLDERS and equals):
            out.append(os.path.abspath(os.path.join(cwd, arg)) if folder_next else
                       f"{option}={os.path.abspath(os.path.join(cwd, value))}")
            folder_next = False
            continue
        folder_next = option in SHARED_FOLDERS
        if option in ("--gpuperf-counters", "--gpuperf-counter-pass", "--gpuperf-count-undecided"):
            raise AbError(f"{option}: give gpuperf ab --counters (every test, in each side's first round) or "
                          "--count-undecided (what time left open, after the last round) instead")
        if option in OWN_OPTIONS:
            raise AbError(f"{option}: gpuperf ab sets it for each round itself; leave it out of the pytest arguments")
        path, sep, rest = arg.partition("::")
        if not arg.startswith("-") and Path(path).is_absolute():
            with contextlib.suppress(ValueError):
                Path(path).resolve().relative_to(repo)
                arg = os.path.relpath(Path(path).resolve(), cwd) + sep + rest
        out.append(arg)
    return out


@contextlib.contextmanager
def rounds_folder(keep: Path | None) -> Iterator[Path]:
    """Where each pytest process's log, results JSON and plan go: `keep` (--logs, made if missing),
    where they stay after the run, else a temporary folder removed with it."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="gpuperf-ab-runs-") as tmp:
        yield Path(tmp)


def in_base(path: Path | None, cwd: Path, repo: Path, base_root: Path) -> Path | None:
    """`path` (relative to `cwd`) as the base checkout holds it, where it lies inside the repository;
    elsewhere as given."""
    if path is None:
        return None
    full = (Path(cwd) / path).resolve()
    try:
        return base_root / full.relative_to(repo)
    except ValueError:
        return full

"""Running the git command line for a sync: one function, a timeout, the same settings everywhere.

The user's git configuration is read (credentials, ``url.<base>.insteadOf``, ssh commands reach the
remote as they do for the user's own pushes), but what would change what a sync writes is set on
every call: no hooks, no signing, no line-ending conversion, no automatic gc, no editor, no prompt.
Files git writes in a clone under the store are the owner's only (umask 077), as every store file is.
The author of a sync commit is the user's git identity (``user.name`` / ``user.email``), or
``cclg <store id>`` when git has none: it is what the receiving stores keep as who wrote a record.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cclg.errors import SyncError

TIMEOUT_SECONDS = 120.0  # a fetch or a push over a slow network; a local command takes milliseconds
BRANCH = "cclg/memory"  # the branch of the remote the records live on, by default

SETTINGS = (
    "core.hooksPath=/dev/null",
    "protocol.ext.allow=never",  # a URL such as ext::sh -c ... never runs a command
    "core.symlinks=false",  # a link a remote committed is checked out as a plain file holding its target
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.quotePath=false",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "merge.renames=false",
    "diff.renames=false",
    "pull.rebase=false",
    "advice.detachedHead=false",
    "init.defaultBranch=" + BRANCH,
)


def environment(identity: tuple[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: no prompt, no editor, C messages, and ``identity`` as author and committer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in ("GIT_SSH", "GIT_SSH_COMMAND")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no", LC_ALL="C", LANG="C")
    if identity is not None:
        name, email = identity
        env.update(GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email)
    return env


def _private() -> None:
    os.umask(0o077)


def run(
    args: list[str],
    cwd: Path,
    *,
    identity: tuple[str, str] | None = None,
    check: bool = True,
    stdin: bytes | None = None,
    timeout: float = TIMEOUT_SECONDS,
) -> subprocess.CompletedProcess[bytes]:
    """``git ARGS`` in ``cwd``; ``SyncError`` (with git's own message) when it fails and ``check``, or
    when it runs past ``timeout``."""
    command = ["git"]
    for setting in SETTINGS:
        command += ["-c", setting]
    command += args
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=environment(identity),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            preexec_fn=_private,
            check=False,
        )
    except FileNotFoundError:
        raise SyncError("git is not installed (cclg sync runs the git command line)") from None
    except subprocess.TimeoutExpired:
        raise SyncError(f"git {args[0]} did not finish within {timeout:.0f}s") from None
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or done.stdout.decode("utf-8", "replace").strip()
        raise SyncError(f"git {args[0]} failed: {message.splitlines()[-1] if message else done.returncode}")
    return done


def text(args: list[str], cwd: Path, **kwargs: object) -> str:
    """What ``git ARGS`` printed, decoded."""
    return run(args, cwd, **kwargs).stdout.decode("utf-8", "replace")  # type: ignore[arg-type]


def user_identity(cwd: Path, fallback: str) -> tuple[str, str]:
    """The user's git identity (``user.name``, ``user.email``), else ``cclg`` at ``fallback``."""
    found = []
    for key in ("user.name", "user.email"):
        done = run(["config", "--get", key], cwd, check=False, timeout=10)
        found.append(done.stdout.decode("utf-8", "replace").strip() if done.returncode == 0 else "")
    name, email = found
    return (name or "cclg", email or f"{fallback}@cclg.invalid")

"""The agent's git checkout of ``--repo`` at ``--branch``, kept current with the
``git`` command (what the machine's git is configured with, credential helpers
and SSH keys included, applies).

The checkout is a plain clone that the agent owns: each update fetches the
branch and moves the work tree to it (``checkout --force``), so a commit that
was force-pushed away is gone from it too.  Files git does not track (a SQLite
state beside the project file, ``.govsync/``) stay.  Without ``--repo`` there is
no checkout: the agent reads the project where it is, and its revision is the
commit of that folder if it is in git.
"""

from __future__ import annotations

import os
import subprocess
import threading

from govsync.errors import AgentError
from govsync.redact import in_text
from govsync.redact import url as safe_url

GIT_TIMEOUT = 120.0
# Never a prompt: an agent has nobody to answer it.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
           "GCM_INTERACTIVE": "never", "LC_ALL": "C"}


def git(*args: str, cwd: str | None = None, timeout: float = GIT_TIMEOUT) -> str:
    """Run git; its output, or AgentError with git's own words (credentials masked)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, check=False, env={**os.environ, **GIT_ENV},
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise AgentError("the git command is not installed (the agent needs it for "
                         "--repo)") from None
    except subprocess.TimeoutExpired:
        raise AgentError(f"git {args[0]} did not finish in {timeout:.0f} s") from None
    if done.returncode != 0:
        words = " ".join((done.stderr or done.stdout).split())[:500]
        raise AgentError(f"git {args[0]} failed: {in_text(words) or 'no message'}")
    return done.stdout


def local(repo: str) -> bool:
    """Whether git reads ``repo`` as a folder of this machine (not ``scheme://`` nor
    ssh's ``host:path``)."""
    if "://" in repo:
        return False
    before, colon, _ = repo.partition(":")
    return not colon or "/" in before


def revision_of(folder: str) -> str | None:
    """The commit checked out in ``folder`` (None: not in git)."""
    try:
        return git("rev-parse", "HEAD", cwd=folder, timeout=15).strip() or None
    except AgentError:
        return None


class Checkout:
    """A clone of ``repo`` in ``directory``, moved to the tip of ``branch`` by
    ``update`` (the remote's default branch when None)."""

    def __init__(self, repo: str, branch: str | None, directory: str) -> None:
        # A folder given relative (``../gov``) is made absolute once, here: git records
        # the origin so, and the agent's later runs may start elsewhere.
        self.repo = os.path.abspath(repo) if local(repo) else repo
        self.branch = branch
        self.directory = os.path.abspath(directory)
        self._lock = threading.Lock()

    @property
    def shown(self) -> str:
        return safe_url(self.repo)

    def update(self) -> str:
        """Fetch and check out the branch's tip: its commit.  AgentError when the
        repository cannot be reached or the folder holds another repository."""
        with self._lock:
            try:
                if not os.path.isdir(os.path.join(self.directory, ".git")):
                    self._clone()
                else:
                    self._fetch()
                return git("rev-parse", "HEAD", cwd=self.directory).strip()
            except AgentError as exc:
                raise AgentError(f"cannot update the checkout of {self.shown}: {exc}") from None

    def _clone(self) -> None:
        if os.path.exists(self.directory) and os.listdir(self.directory):
            raise AgentError(f"{self.directory} is not empty and is no git checkout: give "
                             "--checkout an empty or new folder")
        os.makedirs(os.path.dirname(self.directory) or ".", exist_ok=True)
        branch = ["--branch", self.branch] if self.branch else []
        git("clone", "--quiet", "--no-tags", "--single-branch", *branch, "--", self.repo,
            self.directory)
        if self.branch is None:
            self.branch = git("symbolic-ref", "--short", "HEAD", cwd=self.directory).strip()

    def _fetch(self) -> None:
        origin = git("remote", "get-url", "origin", cwd=self.directory).strip()
        if origin != self.repo and not (local(origin) and os.path.abspath(origin) == self.repo):
            raise AgentError(f"{self.directory} is a checkout of {safe_url(origin)}, not of "
                             f"{self.shown}: give --checkout another folder")
        if self.branch is None:
            found = git("ls-remote", "--symref", "origin", "HEAD", cwd=self.directory)
            ref = next((line.split()[1] for line in found.splitlines()
                        if line.startswith("ref:")), "")
            if not ref.startswith("refs/heads/"):
                raise AgentError("the repository names no default branch: give --branch")
            self.branch = ref.removeprefix("refs/heads/")
        remote = f"refs/remotes/origin/{self.branch}"
        git("fetch", "--quiet", "--no-tags", "--prune", "origin",
            f"+refs/heads/{self.branch}:{remote}", cwd=self.directory)
        git("checkout", "--quiet", "--force", "--detach", remote, cwd=self.directory)

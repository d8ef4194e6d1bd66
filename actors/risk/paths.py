"""Lexical path judgement against the session's workspace.

Why lexical: the session machine must rate a request the same way on every
replay and on every machine, so it may not look at the filesystem.  A path is
joined to the directory the command runs in and normalised as a string; it
is *inside* only when the result stays under the workspace root.  What a
string cannot show (a symlink inside the workspace that points out of it)
is checked by the session actor, which logs the facts it found
(``permission.paths_resolved``), and again by the tool at the point of use.

Rules (each one refuses rather than guesses):

* ``~``, ``~user`` and an absolute path not under the root are outside;
* ``..`` that climbs above the root is outside;
* a glob component that could match ``..`` (one that starts with ``.`` and
  has ``*``, ``?`` or ``[``) is outside; so is brace expansion (``{a,b}``,
  ``{1..3}``), whose words are not known until the shell expands them;
* without a known absolute workspace, relative paths that stay below the
  starting point are inside and every absolute path is outside;
* a few device files are neither inside nor outside but harmless
  (:data:`READ_DEVICES`, :data:`WRITE_DEVICES`).
"""

from __future__ import annotations

import posixpath
import re

READ_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/stdin", "/dev/random", "/dev/urandom", "/dev/fd/0"}
)
WRITE_DEVICES = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2", "/dev/tty"}
)

_SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".gcloud"})
_SECRET_FILES = frozenset(
    {".netrc", ".pgpass", ".npmrc", ".pypirc", ".git-credentials", ".htpasswd", "credentials"}
)
_SECRET_PREFIXES = (".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
_GLOB = re.compile(r"[*?\[]")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


class Workspace:
    """The session's workspace root, as a normalised absolute string (or unknown)."""

    def __init__(self, cwd: str | None) -> None:
        root = posixpath.normpath(cwd) if cwd and cwd.startswith("/") else None
        self.root = root
        self.known = cwd is not None

    def locate(self, word: str, base: str = "") -> str | None:
        """``word`` as a path relative to the root ('' is the root), or None when outside.

        ``base`` is the directory (relative to the root) the command runs in.
        """
        if word == "" or word.startswith("~") or _BRACE.search(word):
            return None
        if word.startswith("/"):
            if self.root is None:
                return None
            full = posixpath.normpath(word)
            if full.startswith("//"):
                full = "/" + full.lstrip("/")
            if full == self.root:
                rel = ""
            elif full.startswith(self.root.rstrip("/") + "/"):
                rel = full[len(self.root.rstrip("/")) + 1 :]
            else:
                return None
        else:
            rel = posixpath.normpath(posixpath.join(base, word)) if base else (
                posixpath.normpath(word)
            )
            if rel == ".":
                rel = ""
            if rel == ".." or rel.startswith("../"):
                return None
        for part in rel.split("/"):
            if part.startswith(".") and _GLOB.search(part):
                return None
        return rel

    def absolute(self, word: str, base: str = "") -> str | None:
        """The path as the process would open it, *not* normalised (for symlink checks)."""
        if self.root is None:
            return None
        if word.startswith("/"):
            return word
        return posixpath.join(self.root, base, word) if base else posixpath.join(self.root, word)


def secret(rel: str) -> str | None:
    """Why reading or writing this workspace path exposes credentials, or None."""
    parts = [p for p in rel.split("/") if p]
    for i, part in enumerate(parts):
        if part in _SECRET_DIRS:
            return f"{part} holds credentials"
        if part in _SECRET_FILES or part.startswith(_SECRET_PREFIXES):
            return f"{part} may hold credentials"
        if part == ".git" and parts[i + 1 : i + 2] == ["config"]:
            return ".git/config may hold credentials and runs programs"
    return None


def git_internal(rel: str) -> bool:
    """Inside ``.git/``: writing there can plant hooks or config that run programs later."""
    return ".git" in rel.split("/")

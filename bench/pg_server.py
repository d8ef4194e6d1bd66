"""A throwaway PostgreSQL server for tests and benches: initdb into a temp dir, a free
port on 127.0.0.1, stopped and deleted at the end.  No mock database anywhere.

initdb refuses to run as root, so as root the server runs as the ``postgres``
user (or ``nobody``) in a temp dir that user owns.  Missing binaries are an
error naming the fix, never a skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

MISSING = "install postgresql (see .ci/run): no pg_ctl/initdb found on PATH or in " \
          "/usr/lib/postgresql/*/bin"


class PostgresMissing(RuntimeError):
    pass


def find_bin() -> Path:
    for name in ("pg_ctl",):
        found = shutil.which(name)
        if found and os.path.exists(Path(os.path.realpath(found)).parent / "initdb"):
            return Path(os.path.realpath(found)).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "initdb")):
            return Path(candidate)
    raise PostgresMissing(MISSING)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, *, fsync: bool = True) -> None:
        self.bin = find_bin()
        self.fsync = fsync
        self.dir = Path(tempfile.mkdtemp(prefix="cap-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.user: str | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    entry = pwd.getpwnam(name)
                except KeyError:
                    continue
                self.user = name
                os.chown(self.dir, entry.pw_uid, entry.pw_gid)
                break
        self._as_user(["initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres",
                       "-E", "UTF8", "--no-instructions", "--no-sync"])

    def _as_user(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        argv = [str(self.bin / argv[0]), *argv[1:]]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120,
                              cwd=self.dir, **kw)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, schema: str) -> str:
        """A URL whose log lives in its own schema (one server, many independent logs)."""
        return f"{self.url}?options=-csearch_path%3D{schema}"

    def start(self) -> None:
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} "
                   f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200")
        try:
            self._as_user(["pg_ctl", "-D", str(self.data), "-o", options,
                           "-l", str(self.dir / "server.log"), "-w", "-t", "60", "start"])
        except subprocess.CalledProcessError as exc:
            log = (self.dir / "server.log").read_text() if (self.dir / "server.log").exists() \
                else ""
            raise RuntimeError(f"postgres did not start: {exc.stderr}\n{log[-2000:]}") from None

    def stop(self, mode: str = "fast") -> None:
        """``mode`` immediate is a crash: no shutdown checkpoint, recovery at the next start."""
        self._as_user(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"])

    def running(self) -> bool:
        argv = [str(self.bin / "pg_ctl"), "-D", str(self.data), "status"]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0

    def psql(self, sql: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cur = conn.execute(sql)
            return "" if cur.description is None else repr(cur.fetchall())

    def destroy(self) -> None:
        if self.running():
            try:
                self.stop("immediate")
            except subprocess.CalledProcessError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PgServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

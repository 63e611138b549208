r"""A real PostgreSQL server for the shared-ledger tests (issue 17 item 5), no mock.

``postgres_url`` runs ``initdb`` into a fresh temporary directory and starts ``postgres``
listening only on a unix socket in that directory (no TCP), once per test session, and
stops it at the end. The binaries are looked for on PATH, then in
``/usr/lib/postgresql/*/bin`` (Debian's layout; ``.ci/run`` installs the ``postgresql``
package when they are missing). PostgreSQL refuses to run as root: as root the server
runs as the ``postgres`` system user (created if it does not exist). Missing binaries
FAIL the tests that need the server, with a message saying what to install: a skipped
database test would hide exactly the failure it is there to catch.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

_PG_USER = "postgres"


def postgres_bin_dir() -> Path | None:
    r"""A directory holding ``initdb``, ``pg_ctl`` and ``postgres``: PATH first, then the
    newest ``/usr/lib/postgresql/<version>/bin``."""
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    versions.sort(key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else -1, reverse=True)
    candidates += [Path(p) for p in versions]
    for directory in candidates:
        if all((directory / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def _server_user() -> pwd.struct_passwd | None:
    r"""The user to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(_PG_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", _PG_USER],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(_PG_USER)


def _run_as(user: pwd.struct_passwd | None, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    if user is not None:
        kwargs.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        kwargs["env"] = {**os.environ, "HOME": "/tmp", "USER": user.pw_name, "LOGNAME": user.pw_name}
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="session")
def postgres_url():
    r"""The SQLAlchemy URL of a fresh PostgreSQL server on a unix socket (session-wide)."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.fail(
            "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found on PATH or in "
            "/usr/lib/postgresql/*/bin. Install them (Debian/Ubuntu: apt-get install -y postgresql; "
            ".ci/run does this) - the shared-ledger tests need a real server and are never skipped."
        )
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="bdpg-", dir="/tmp"))  # short: a socket path has ~100 bytes
    data, log = root / "data", root / "server.log"
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    try:
        _run_as(
            user, [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", _PG_USER, "-E", "UTF8", "--no-sync"]
        )
        options = f"-k {root} -c listen_addresses='' -c fsync=off -c max_connections=60"
        _run_as(
            user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"]
        )
    except subprocess.CalledProcessError as err:
        logged = log.read_text() if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"Could not start PostgreSQL from {bin_dir}: {err.stderr}\n{logged}")
    try:
        yield f"postgresql+psycopg://{_PG_USER}@/postgres?host={root}"
    finally:
        try:
            _run_as(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    r"""A ledger database URL: an SQLite file, then the PostgreSQL server of ``postgres_url``."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'budget.db'}"
    return request.getfixturevalue("postgres_url")

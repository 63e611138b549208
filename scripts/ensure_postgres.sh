#!/bin/sh
# PostgreSQL server binaries for the shared-ledger tests (tests/privacy/conftest.py starts a
# throwaway server on a unix socket in a temporary directory; nothing listens on TCP).
# Installs Debian's `postgresql` package only when initdb is missing; never fatal: where it
# cannot install (no apt-get, no root or sudo), it says so and the PostgreSQL tests will
# fail with the same advice.
if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo" ] || command -v sudo >/dev/null 2>&1; }; then
    echo "installing PostgreSQL (Debian package postgresql) for the shared-ledger tests"
    $sudo apt-get update -qq >/dev/null &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null &&
        exit 0
fi
echo "warning: PostgreSQL server binaries (initdb) not found and not installable here;" \
     "install PostgreSQL >= 13 for tests/privacy/test_ledger_storage.py" >&2
exit 0

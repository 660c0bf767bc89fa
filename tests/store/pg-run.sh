#!/bin/sh
# pg-run.sh CMD [ARGS...]: runs CMD against a PostgreSQL server of its own.
#
# The server (Debian's postgresql package) lives in a fresh temporary
# directory and listens only on a unix socket there; its superuser "hangar"
# signs in with a random password (scram-sha-256), so tests can also show
# what a wrong one does. PostgreSQL refuses to run as root: as root, the
# server runs as nobody. CMD finds the server in HANGAR_TEST_PG_HOST (the
# socket directory), _PORT, _USER and _PASSWORD, and HANGAR_TEST_PG_CTL runs
# pg_ctl on it (as the right user) for tests that stop or restart it.
set -eu

bindir=
for d in "${PG_BINDIR:-}" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
	if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
		bindir=$d
		break
	fi
done
if [ -z "$bindir" ]; then
	echo "pg-run: no PostgreSQL server (initdb, pg_ctl): install Debian's postgresql package (./dev test does)" >&2
	exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/hangar-pg.XXXXXX")
as=
if [ "$(id -u)" = 0 ]; then
	chown nobody "$dir"
	as="runuser -u nobody --"
fi
cleanup() {
	$as "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

password=$(od -An -N18 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && printf '%s\n' "$password" >"$dir/pw")
[ -z "$as" ] || chown nobody "$dir/pw"
if ! $as "$bindir/initdb" -D "$dir/data" -U hangar --pwfile="$dir/pw" --auth=scram-sha-256 -E UTF8 \
	--no-sync >"$dir/initdb.log" 2>&1; then
	cat "$dir/initdb.log" >&2
	exit 1
fi
rm -f "$dir/pw"
# -w: pg_ctl itself waits (with its deadline, -t) until the server accepts connections.
if ! $as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
	-o "-k $dir -c listen_addresses= -p 5432 -c fsync=off -c max_connections=100" start >/dev/null; then
	cat "$dir/server.log" >&2
	exit 1
fi

ctl="$dir/pg_ctl"
printf '#!/bin/sh\nexec %s "%s/pg_ctl" -D "%s/data" -l "%s/server.log" -w -t 120 "$@"\n' "$as" "$bindir" "$dir" "$dir" >"$ctl"
chmod 755 "$ctl"

export HANGAR_TEST_PG_HOST="$dir" HANGAR_TEST_PG_PORT=5432 HANGAR_TEST_PG_USER=hangar \
	HANGAR_TEST_PG_PASSWORD="$password" HANGAR_TEST_PG_CTL="$ctl"
status=0
"$@" || status=$?
if [ "$status" != 0 ] && [ -f "$dir/server.log" ]; then
	echo "pg-run: the server's log:" >&2
	tail -n 50 "$dir/server.log" >&2
fi
exit "$status"

#!/bin/sh
# The auth file from the environment (PGBOUNCER_USER, PGBOUNCER_PASSWORD: the database role Tenet connects as),
# readable by this user only; then PgBouncer in the foreground.
set -eu
: "${PGBOUNCER_USER:?set PGBOUNCER_USER}"
: "${PGBOUNCER_PASSWORD:?set PGBOUNCER_PASSWORD}"
umask 077
printf '"%s" "%s"\n' "$PGBOUNCER_USER" "$PGBOUNCER_PASSWORD" > /run/pgbouncer/userlist.txt
exec pgbouncer /etc/pgbouncer/pgbouncer.ini

#!/bin/bash
# The hot standby (docs/operations.md, "A read replica"): on its first start it copies the primary with
# `pg_basebackup -R` (which writes primary_conninfo and standby.signal), then runs as a streaming standby. Runs as
# the postgres user (the Compose service sets `user: postgres`).
set -euo pipefail
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"
: "${PGDATA:?set PGDATA}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready --host primary --port 5432 --quiet; do sleep 1; done
  PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup --host primary --port 5432 --username replicator \
    --pgdata "$PGDATA" --write-recovery-conf --wal-method stream --checkpoint fast
  chmod 0700 "$PGDATA"
fi
# Long reads are not cancelled by replay (Tenet would retry them on the primary, at the primary's cost).
exec postgres -c hot_standby=on -c hot_standby_feedback=on

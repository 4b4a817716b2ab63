#!/bin/bash
# Run once by the postgres image's entrypoint on the primary's first start (/docker-entrypoint-initdb.d): a role the
# standby streams WAL with, and the one line of pg_hba.conf that lets it. The password comes from the environment
# (REPLICATION_PASSWORD), never from the image.
set -euo pipefail
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     --set password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"

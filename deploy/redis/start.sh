#!/bin/sh
# Start a staging Redis node or Sentinel (docker-compose.yml) from a writable copy of its
# seed config: start.sh SEED [redis-server options...].
#
# Sentinel rewrites the file it was started from (its id, the replicas and Sentinels it
# found, which node is the primary), and so does a node Sentinel reconfigures (REPLICAOF,
# then CONFIG REWRITE). The seed is mounted read-only, so the running copy lives in the
# working directory (the image's /data, the container's volume, beside the data), is made
# from the seed on the first start only, and is kept across restarts: a node restarted
# after a failover must come back with the role Sentinel gave it, not the one the seed
# names. deploy/redis/README.md says how to change a setting afterwards.
set -eu
seed=$1
shift
conf=$PWD/${seed##*/}
if [ ! -s "$conf" ]; then
    cp "$seed" "$conf.tmp"
    mv "$conf.tmp" "$conf"  # whole or absent, even if the container dies mid-copy
fi
# The image's entrypoint gives /data to the redis user and drops root before starting.
exec docker-entrypoint.sh redis-server "$conf" "$@"

#!/usr/bin/env bash
# run-ha.sh — a local high-availability demo (make run-ha): one embedded
# etcd (cronix etcd), three cronix server replicas forming a raft cluster
# (HTTP 8081-8083, raft 7001-7003) and one cronix node, all on 127.0.0.1.
#
# Database: one SQLite file, ./data-ha/cronix.db, shared by the three
# replicas (WAL + busy timeout make that work on ONE machine; it is a demo,
# not a deployment). Set CRONIX_HA_DB to a PostgreSQL/MySQL DSN to use that.
# Admin login: CRONIX_ADMIN_PASSWORD, or a generated password printed once
# (by the replica that created the admin user, on the first start).
# etcd runs with auth on: its root password is generated into
# ./data-ha/etcd-root-password (mode 0600) and the servers and the node log
# in as root with it (CRONIX_ETCD_USERNAME / CRONIX_ETCD_PASSWORD).
# Ctrl-C stops everything.
set -euo pipefail

BIN=${BIN:-bin/cronix}
DIR=${HA_DATA_DIR:-./data-ha}
HOST=127.0.0.1
mkdir -p "$DIR/logs"
DB=${CRONIX_HA_DB:-sqlite://$(cd "$DIR" && pwd)/cronix.db}

if [[ -z "${CRONIX_NODE_TOKEN:-}" ]]; then
  if [[ ! -s "$DIR/node-token" ]]; then
    (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/node-token")
  fi
  CRONIX_NODE_TOKEN=$(cat "$DIR/node-token")
fi
export CRONIX_NODE_TOKEN

# secret FILE: a random hex secret kept in FILE (created 0600 if missing).
secret() {
  if [[ ! -s "$1" ]]; then
    (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1")
  fi
  cat "$1"
}
CRONIX_ETCD_ROOT_PASSWORD=$(secret "$DIR/etcd-root-password")
export CRONIX_ETCD_USERNAME=root CRONIX_ETCD_PASSWORD=$CRONIX_ETCD_ROOT_PASSWORD

pids=()
stop() {
  trap - INT TERM EXIT
  echo "stopping…"
  # Reverse order: node, servers (the leader hands over), etcd last.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  exit 0
}
trap stop INT TERM EXIT

# wait_for FILE REGEX PID: until the process's output matches, or it died.
wait_for() {
  local file=$1 re=$2 pid=$3
  for _ in $(seq 1 600); do
    grep -qE "$re" "$file" 2>/dev/null && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "process $pid exited; its log ($file):" >&2
      tail -n 30 "$file" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "timed out waiting for /$re/ in $file" >&2
  return 1
}

CRONIX_ETCD_ROOT_PASSWORD=$CRONIX_ETCD_ROOT_PASSWORD \
  "$BIN" etcd --data-dir "$DIR/etcd" --client-addr $HOST:2379 --peer-addr $HOST:2380 \
  >"$DIR/logs/etcd.out" 2>"$DIR/logs/etcd.log" &
pids+=($!)
wait_for "$DIR/logs/etcd.out" 'etcd is running' "${pids[-1]}"

PEERS=s1=$HOST:7001,s2=$HOST:7002,s3=$HOST:7003
for i in 1 2 3; do
  "$BIN" server --id s$i --raft-addr $HOST:700$i --raft-peers "$PEERS" \
    --etcd-endpoints http://$HOST:2379 --db "$DB" --http-addr $HOST:808$i \
    --data-dir "$DIR/s$i" >"$DIR/logs/s$i.out" 2>"$DIR/logs/s$i.log" &
  pids+=($!)
  # One at a time: the first creates the schema and the admin user.
  wait_for "$DIR/logs/s$i.out" 'is running' "${pids[-1]}"
done

"$BIN" node --data-dir "$DIR/node" --etcd-endpoints http://$HOST:2379 --http-allow-loopback \
  >"$DIR/logs/node.out" 2>"$DIR/logs/node.log" &
pids+=($!)
wait_for "$DIR/logs/node.out" 'is running' "${pids[-1]}"

echo
echo "Cronix HA demo is running: 3 server replicas, 1 node, 1 etcd"
for i in 1 2 3; do echo "  s$i:    http://$HOST:808$i   (raft $HOST:700$i)"; done
login=$(grep -h 'login:' "$DIR"/logs/s[123].out | grep -v 'set on first start' | head -n 1 || true)
if [[ -n "$login" ]]; then echo "$login"; else echo "  login: admin (password set on first start)"; fi
echo "  db:    ${DB}"
echo "  etcd:  http://$HOST:2379 (user root, password in $DIR/etcd-root-password)"
echo "  logs:  $DIR/logs/   cluster status: GET /api/v1/cluster"
echo "  Stop with Ctrl-C."
echo
# Keep running when one process dies (kill the leader to watch a failover);
# only Ctrl-C stops the demo.
live=("${pids[@]}")
while ((${#live[@]} > 0)); do
  wait -n "${live[@]}" 2>/dev/null || true
  still=()
  for p in "${live[@]}"; do kill -0 "$p" 2>/dev/null && still+=("$p"); done
  if ((${#still[@]} < ${#live[@]})); then
    echo "a process exited (${#still[@]} of ${#pids[@]} still running); see $DIR/logs/" >&2
  fi
  live=("${still[@]}")
done

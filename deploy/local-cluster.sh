#!/usr/bin/env bash
# Starts, on one machine, what docs/deploy.md describes: a Redis Cluster of
# Debian's redis-server (3 masters, 3 replicas), N statebank replicas sharing
# it as their remote tier, and HAProxy (deploy/haproxy.cfg) routing each
# conversation to one replica by its affinity key.
#
#   deploy/local-cluster.sh start DIR [--replicas N] [--model M] [--base-port P] [-- SERVE FLAGS...]
#   deploy/local-cluster.sh stop DIR
#
# Ports: Redis nodes P..P+5 (cluster bus P+20..P+25), replicas P+10..P+10+N-1,
# HAProxy P+9. Everything lives in DIR: logs, bank directories, the remote
# secret, the generated haproxy.cfg, and DIR/pids ("NAME PID" lines) and
# DIR/ports ("NAME PORT" lines) for whoever drives it. The statebank binary
# is $STATEBANK, else build/release/statebank.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
usage() { sed -n '8,9p' "$0" | sed 's/^# *//' >&2; exit 2; }

stop_all() {
  local dir=$1
  [[ -f "$dir/pids" ]] || return 0
  # Proxy first, then replicas (SIGTERM: they finish running requests), then Redis.
  tac "$dir/pids" | while read -r name pid; do kill "$pid" 2>/dev/null || true; done
  tac "$dir/pids" | while read -r name pid; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -f "$dir/pids"
}

wait_http() {  # url, seconds, pid of the server (its exit fails the wait at once)
  for _ in $(seq $(($2 * 10))); do
    curl -sf -o /dev/null "$1" && return 0
    kill -0 "$3" 2>/dev/null || break
    sleep 0.1
  done
  echo "local-cluster: $1 did not answer" >&2
  return 1
}

wait_redis() {  # port, pid, node dir: a node that exits (its port taken) fails the start at once
  for _ in $(seq 100); do
    timeout 2 redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "local-cluster: the redis node on port $1 did not start:" >&2
  tail -3 "$3/redis.log" >&2 2>/dev/null
  return 1
}

pid_of() {  # DIR NAME: NAME's pid from DIR/pids
  awk -v n="$2" '$1 == n {print $2}' "$1/pids"
}

start_all() {
  local dir=$1
  shift
  local replicas=3 model=demo base=7000
  while (($#)); do
    case "$1" in
      --replicas) replicas=$2; shift 2 ;;
      --model) model=$2; shift 2 ;;
      --base-port) base=$2; shift 2 ;;
      --) shift; break ;;
      *) usage ;;
    esac
  done
  local statebank="${STATEBANK:-$root/build/release/statebank}"
  [[ -x "$statebank" ]] || { echo "local-cluster: no statebank binary at $statebank" >&2; exit 2; }
  mkdir -p "$dir"
  : >"$dir/pids"
  : >"$dir/ports"
  trap 'stop_all "$dir"' ERR

  # The Redis Cluster: 6 nodes, joined with one replica per master.
  local nodes=()
  for i in 0 1 2 3 4 5; do
    local port=$((base + i)) ndir="$dir/redis$i"
    mkdir -p "$ndir"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$ndir" --save "" --appendonly no --daemonize no \
      --logfile "$ndir/redis.log" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-port $((base + 20 + i)) --cluster-node-timeout 1000 --cluster-require-full-coverage no \
      </dev/null >"$ndir/stdout.log" 2>&1 &
    echo "redis$i $!" >>"$dir/pids"
    echo "redis$i $port" >>"$dir/ports"
    nodes+=("127.0.0.1:$port")
  done
  for i in "${!nodes[@]}"; do
    wait_redis "${nodes[$i]#*:}" "$(pid_of "$dir" "redis$i")" "$dir/redis$i"
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/cluster-create.log" 2>&1 ||
    { echo "local-cluster: redis-cli --cluster create failed:" >&2; tail -5 "$dir/cluster-create.log" >&2; stop_all "$dir"; exit 1; }
  for n in "${nodes[@]}"; do
    for _ in $(seq 100); do
      redis-cli -p "${n#*:}" cluster info 2>/dev/null | grep -q cluster_state:ok && break
      sleep 0.1
    done
  done

  # The replicas' shared MAC key.
  (umask 077; head -c 32 /dev/urandom | base64 >"$dir/remote.secret")

  # N replicas on the cluster.
  local servers=""
  for ((r = 1; r <= replicas; r++)); do
    local port=$((base + 9 + r))
    "$statebank" serve --model "$model" --port "$port" --bank-dir "$dir/replica$r" \
      --remote "redis-cluster://${nodes[0]},${nodes[1]}" --remote-secret-file "$dir/remote.secret" "$@" \
      </dev/null >"$dir/replica$r.log" 2>&1 &
    echo "replica$r $!" >>"$dir/pids"
    echo "replica$r $port" >>"$dir/ports"
    servers+="  server replica$r 127.0.0.1:$port"$'\n'
  done
  for ((r = 1; r <= replicas; r++)); do
    wait_http "http://127.0.0.1:$((base + 9 + r))/health" 300 "$(pid_of "$dir" "replica$r")" ||
      { tail -3 "$dir/replica$r.log" >&2; stop_all "$dir"; exit 1; }
  done

  # HAProxy in front.
  { cat "$root/deploy/haproxy.cfg"; printf '%s' "$servers"; } >"$dir/haproxy.cfg"
  SB_PROXY_BIND="127.0.0.1:$((base + 9))" haproxy -f "$dir/haproxy.cfg" -db </dev/null >"$dir/haproxy.log" 2>&1 &
  echo "haproxy $!" >>"$dir/pids"
  echo "haproxy $((base + 9))" >>"$dir/ports"
  wait_http "http://127.0.0.1:$((base + 9))/health" 30 "$(pid_of "$dir" haproxy)" ||
    { tail -3 "$dir/haproxy.log" >&2; stop_all "$dir"; exit 1; }
  trap - ERR
  echo "local-cluster: http://127.0.0.1:$((base + 9)) -> $replicas replicas on redis-cluster://${nodes[0]},${nodes[1]} (state in $dir)"
}

case "${1:-}" in
  start) [[ $# -ge 2 ]] || usage; start_all "${@:2}" ;;
  stop) [[ $# -eq 2 ]] || usage; stop_all "$2" ;;
  *) usage ;;
esac

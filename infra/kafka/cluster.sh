#!/usr/bin/env bash
# Local three-node Apache Kafka 4.x cluster (KRaft) on loopback for RetryLens tests:
# each node is a combined broker+controller run by infra/kafka/kafka.sh with a home
# of its own; this script only adds what a cluster needs on top of a single node.
# Topics default to replication factor 3 with min.insync.replicas=2, so one node may
# die (SIGKILL) and acks=all writes go on; so do the group offsets and transactions.
#
# Usage: infra/kafka/cluster.sh {start|stop|status|kill N|start-node N|stop-node N|reset|logs N|bootstrap}
#
#   start        fetch jars if needed, format every node with one shared cluster id
#                (once), start all nodes in parallel and wait until each answers
#   stop         SIGTERM every node (in parallel), data kept
#   status       one line per node; exit 0 only when every node answers
#   kill N|all   SIGKILL node N (1-based) or every node: a hard crash, data kept
#   start-node N start (or restart) node N alone, e.g. after 'kill N'
#   stop-node N  SIGTERM node N alone
#   reset        stop every node and delete the cluster home (jars kept)
#   logs N       tail of node N's server log
#   bootstrap    print the comma-separated client bootstrap list
#
# Environment (all optional):
#   KAFKA_CLUSTER_HOME   one sub-directory node<N> per node      (default: <repo>/.kafka-cluster)
#   KAFKA_NODES          number of nodes (controller quorum = all) (default: 3)
#   KAFKA_CLUSTER_PORT   client port of node 1; node N listens on PORT+N-1 and its
#                        controller on PORT+KAFKA_NODES+N-1       (default: 19292)
#   KAFKA_LIB_DIR        the broker jars (kafka.sh fetch fills it)  (default: <repo>/.kafka/lib)
#   KAFKA_MIN_INSYNC     min.insync.replicas                       (default: 2, 1 for one node)
#   KAFKA_HEAP_OPTS      heap (and JIT) flags of each node: C1 only, which starts three JVMs
#                        on two cores in about half the time      (default: -Xms192m -Xmx384m -XX:TieredStopAtLevel=1)
#   KAFKA_EXTRA_CONFIG   extra server.properties lines for every node, appended last
#   KAFKA_START_TIMEOUT, KAFKA_STOP_TIMEOUT, KAFKA_BROKER_SESSION_TIMEOUT_MS, JAVA: as in kafka.sh
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/../.." && pwd)"
KAFKA_SH="$SCRIPT_DIR/kafka.sh"

KAFKA_CLUSTER_HOME="${KAFKA_CLUSTER_HOME:-$REPO/.kafka-cluster}"
KAFKA_NODES="${KAFKA_NODES:-3}"
KAFKA_CLUSTER_PORT="${KAFKA_CLUSTER_PORT:-19292}"
KAFKA_LIB_DIR="${KAFKA_LIB_DIR:-$REPO/.kafka/lib}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms192m -Xmx384m -XX:TieredStopAtLevel=1}"
CLUSTER_EXTRA_CONFIG="${KAFKA_EXTRA_CONFIG:-}"
if [[ -z "${JAVA:-}" ]]; then
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
fi
export JAVA KAFKA_HEAP_OPTS

[[ "$KAFKA_NODES" =~ ^[1-9][0-9]*$ ]] || { echo "[cluster.sh] ERROR: KAFKA_NODES must be a positive integer" >&2; exit 1; }
if (( KAFKA_NODES >= 3 )); then MIN_INSYNC_DEFAULT=2; else MIN_INSYNC_DEFAULT=1; fi
KAFKA_MIN_INSYNC="${KAFKA_MIN_INSYNC:-$MIN_INSYNC_DEFAULT}"
REPLICATION=$(( KAFKA_NODES < 3 ? KAFKA_NODES : 3 ))
CLUSTER_ID_FILE="$KAFKA_CLUSTER_HOME/cluster.id"

log() { printf '[cluster.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

client_port() { echo $(( KAFKA_CLUSTER_PORT + $1 - 1 )); }
controller_port() { echo $(( KAFKA_CLUSTER_PORT + KAFKA_NODES + $1 - 1 )); }
node_home() { echo "$KAFKA_CLUSTER_HOME/node$1"; }
nodes() { seq 1 "$KAFKA_NODES"; }

check_node() {
  [[ "${1:-}" =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= KAFKA_NODES )) \
    || die "node must be 1..$KAFKA_NODES (got '${1:-}')"
}

voters() {
  local n out=""
  for n in $(nodes); do out+="${out:+,}$n@127.0.0.1:$(controller_port "$n")"; done
  echo "$out"
}

bootstrap() {
  local n out=""
  for n in $(nodes); do out+="${out:+,}127.0.0.1:$(client_port "$n")"; done
  echo "$out"
}

# The lines that turn kafka.sh's single node into node N of the cluster. kafka.sh appends
# them after its own settings; a later key wins in a Java properties file.
node_config() {
  cat <<EOF
node.id=$1
controller.quorum.voters=$(voters)
default.replication.factor=$REPLICATION
min.insync.replicas=$KAFKA_MIN_INSYNC
offsets.topic.replication.factor=$REPLICATION
transaction.state.log.replication.factor=$REPLICATION
transaction.state.log.min.isr=$KAFKA_MIN_INSYNC
share.coordinator.state.topic.replication.factor=$REPLICATION
share.coordinator.state.topic.min.isr=$KAFKA_MIN_INSYNC
EOF
  if [[ -n "$CLUSTER_EXTRA_CONFIG" ]]; then printf '%s\n' "$CLUSTER_EXTRA_CONFIG"; fi
}

# Run kafka.sh for node N with that node's home, ports and configuration.
node_sh() {
  local n="$1"; shift
  KAFKA_HOME="$(node_home "$n")" KAFKA_DATA_DIR="$(node_home "$n")/data" \
    KAFKA_PORT="$(client_port "$n")" KAFKA_CONTROLLER_PORT="$(controller_port "$n")" \
    KAFKA_EXTRA_CONFIG="$(node_config "$n")" \
    bash "$KAFKA_SH" "$@"
}

java_tool() {
  timeout -k 5 60 "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -cp "$KAFKA_LIB_DIR/*" "$@"
}

ensure_lib() {
  if [[ ! -f "$KAFKA_LIB_DIR/.complete" ]]; then
    KAFKA_HOME="$(dirname "$KAFKA_LIB_DIR")" bash "$KAFKA_SH" fetch
  fi
  local n home
  for n in $(nodes); do
    home="$(node_home "$n")"
    mkdir -p "$home"
    [[ -e "$home/lib" ]] || ln -s "$KAFKA_LIB_DIR" "$home/lib"
  done
}

cluster_id() {
  if [[ ! -s "$CLUSTER_ID_FILE" ]]; then
    mkdir -p "$KAFKA_CLUSTER_HOME"
    # What 'kafka-storage random-uuid' prints (16 random bytes, unpadded base64url, never
    # starting with '-'), without starting a JVM for it.
    local id="-"
    while [[ "$id" == -* ]]; do
      id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    done
    printf '%s\n' "$id" >"$CLUSTER_ID_FILE"
  fi
  cat "$CLUSTER_ID_FILE"
}

# kafka.sh formats a node with a random cluster id of its own unless its storage is already
# formatted, so every node is formatted here first, with the shared id and the same voters.
format_node() {
  local n="$1" id="$2" home data
  home="$(node_home "$n")"
  data="$home/data"
  [[ -f "$data/meta.properties" ]] && return 0
  mkdir -p "$home/config" "$home/logs" "$data"
  cat >"$home/config/format.properties" <<EOF
process.roles=broker,controller
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$(client_port "$n"),CONTROLLER://127.0.0.1:$(controller_port "$n")
log.dirs=$data
metadata.log.dir=$data
$(node_config "$n")
EOF
  java_tool kafka.tools.StorageTool format --config "$home/config/format.properties" \
    --cluster-id "$id" --ignore-formatted >"$home/logs/format.log" 2>&1 \
    || { cat "$home/logs/format.log" >&2; die "formatting node $n failed"; }
}

# Run "$@" once per node in parallel ("{}" stands for the node number); fail if any fails.
each_node() {
  local n pids=() failed=0
  for n in $(nodes); do
    "${@//\{\}/$n}" &
    pids+=("$!")
  done
  for n in "${!pids[@]}"; do wait "${pids[$n]}" || failed=1; done
  return "$failed"
}

cmd_start() {
  ensure_lib
  local id
  id="$(cluster_id)"
  each_node format_node {} "$id" || die "formatting failed"
  log "starting $KAFKA_NODES nodes (cluster id $id) on $(bootstrap)"
  local start=$SECONDS
  # A node is only ready once a quorum of controllers runs: start them together.
  each_node node_sh {} start || die "not every node started (logs: $KAFKA_CLUSTER_HOME/node*/logs)"
  log "cluster ready on $(bootstrap) after $((SECONDS - start))s"
}

cmd_status() {
  local n bad=0
  for n in $(nodes); do
    if node_sh "$n" status 2>/dev/null; then
      echo "node $n: up on 127.0.0.1:$(client_port "$n")"
    else
      echo "node $n: down"; bad=1
    fi
  done
  return "$bad"
}

cmd_reset() {
  each_node node_sh {} stop || true
  log "deleting $KAFKA_CLUSTER_HOME"
  rm -rf "$KAFKA_CLUSTER_HOME"
}

main() {
  local sub="${1:-}"
  shift || true
  case "$sub" in
    start)      cmd_start ;;
    stop)       each_node node_sh {} stop ;;
    status)     cmd_status ;;
    kill)       if [[ "${1:-}" == all ]]; then each_node node_sh {} kill; else check_node "${1:-}"; node_sh "$1" kill; fi ;;
    start-node) check_node "${1:-}"; ensure_lib; node_sh "$1" start ;;
    stop-node)  check_node "${1:-}"; node_sh "$1" stop ;;
    reset)      cmd_reset ;;
    logs)       check_node "${1:-}"; node_sh "$1" logs "${@:2}" ;;
    bootstrap)  bootstrap ;;
    -h|--help|help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2 ;;
    *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
  esac
}

main "$@"

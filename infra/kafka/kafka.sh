#!/usr/bin/env bash
# Local single-node Apache Kafka 4.x broker (KRaft, combined broker+controller)
# for RetryLens tests. No Docker, no tarball: the jars come from Maven Central
# through infra/kafka/pom.xml.
#
# Usage: infra/kafka/kafka.sh {fetch|start|stop|status|restart|kill|reset|logs}
#
#   fetch    resolve the broker jars into $KAFKA_HOME/lib (no-op when complete)
#   start    fetch if needed, write config, format storage once, start the broker
#            in the background and wait until it serves client requests
#            (on timeout: log tail, broker stopped, exit 1)
#   stop     SIGTERM, wait up to $KAFKA_STOP_TIMEOUT s, then SIGKILL (no-op if down)
#   status   exit 0 when the broker is running and answers a metadata request
#   restart  stop (data kept) then start
#   kill     SIGKILL the broker (simulates a hard crash; data kept)
#   reset    stop and delete data + logs (jars kept)
#   logs     print the tail of the server log
#
# Environment (all optional):
#   KAFKA_HOME              everything generated lives here   (default: <repo>/.kafka)
#   KAFKA_DATA_DIR          log.dirs + KRaft metadata         (default: $KAFKA_HOME/data)
#   KAFKA_PORT              client listener on 127.0.0.1      (default: 9092)
#   KAFKA_CONTROLLER_PORT   KRaft controller listener         (default: 9093)
#   KAFKA_HEAP_OPTS         broker heap                       (default: -Xms512m -Xmx512m)
#   KAFKA_START_TIMEOUT     seconds to wait for readiness     (default: 90)
#   KAFKA_STOP_TIMEOUT      seconds to wait after SIGTERM     (default: 30)
#   KAFKA_BROKER_SESSION_TIMEOUT_MS  broker.session.timeout.ms; bounds the extra
#                           wait of a start after 'kill'     (default: 4000)
#   KAFKA_EXTRA_CONFIG      extra server.properties lines, appended last (newline separated)
#   KAFKA_MVN_ARGS          extra arguments for mvn during fetch
#   JAVA                    java binary                       (default: $JAVA_HOME/bin/java or java)
#
# Secured mode (opt-in; unset = the plain broker above, unchanged):
#   KAFKA_SASL              1 => the client listener on $KAFKA_PORT is SASL_PLAINTEXT and
#                           accepts PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; the broker talks
#                           to itself over it with PLAIN as the admin user; the controller
#                           listener stays PLAINTEXT on 127.0.0.1
#   KAFKA_SASL_ADMIN_PASSWORD  password of user 'admin' (super user)  (default: admin-secret)
#   KAFKA_SASL_USERS        space separated user:password pairs, each created for PLAIN
#                           (JAAS) and, at format time, for both SCRAM mechanisms
#                           (default: "alice:alice-secret bob:bob-secret")
#   KAFKA_SSL_PORT          with KAFKA_SASL: also a SASL_SSL listener on this port; a
#                           self-signed certificate for 127.0.0.1/localhost is made once
#                           in $KAFKA_HOME/config/tls (clients trust tls/ca.pem)
#   KAFKA_AUTHORIZER        1 => StandardAuthorizer with super.users=User:admin and
#                           User:ANONYMOUS (the PLAINTEXT controller listener only); every
#                           other principal needs ACLs (no ACL = denied)
# SCRAM credentials are written when the storage is formatted: change the users with
# 'reset' then 'start'. The tools' own client config (readiness check) logs in as admin.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/../.." && pwd)"
POM="$SCRIPT_DIR/pom.xml"

KAFKA_HOME="${KAFKA_HOME:-$REPO/.kafka}"
KAFKA_DATA_DIR="${KAFKA_DATA_DIR:-$KAFKA_HOME/data}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms512m -Xmx512m}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
KAFKA_EXTRA_CONFIG="${KAFKA_EXTRA_CONFIG:-}"
KAFKA_BROKER_SESSION_TIMEOUT_MS="${KAFKA_BROKER_SESSION_TIMEOUT_MS:-4000}"
KAFKA_MVN_ARGS="${KAFKA_MVN_ARGS:-}"
KAFKA_SASL="${KAFKA_SASL:-}"
KAFKA_SASL_ADMIN_PASSWORD="${KAFKA_SASL_ADMIN_PASSWORD:-admin-secret}"
KAFKA_SASL_USERS="${KAFKA_SASL_USERS:-alice:alice-secret bob:bob-secret}"
KAFKA_AUTHORIZER="${KAFKA_AUTHORIZER:-}"
KAFKA_SSL_PORT="${KAFKA_SSL_PORT:-}"
if [[ -z "${JAVA:-}" ]]; then
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
fi

LIB_DIR="$KAFKA_HOME/lib"
CONF_DIR="$KAFKA_HOME/config"
LOG_DIR="$KAFKA_HOME/logs"
RUN_DIR="$KAFKA_HOME/run"
PID_FILE="$RUN_DIR/kafka.pid"
SERVER_PROPS="$CONF_DIR/server.properties"
SERVER_LOG="$LOG_DIR/server.log"
STDOUT_LOG="$LOG_DIR/kafkaServer.out"
LIB_STAMP="$LIB_DIR/.complete"
BOOTSTRAP="127.0.0.1:$KAFKA_PORT"
MAIN_CLASS="kafka.Kafka"

log() { printf '[kafka.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH ($2)"; }

# Identity of the current pom: the lib dir is only "complete" for this exact pom.
pom_digest() { sha256sum "$POM" | cut -d' ' -f1; }

lib_complete() {
  [[ -f "$LIB_STAMP" ]] && [[ "$(cat "$LIB_STAMP")" == "$(pom_digest)" ]] \
    && compgen -G "$LIB_DIR/kafka_2.13-*.jar" >/dev/null \
    && compgen -G "$LIB_DIR/kafka-tools-*.jar" >/dev/null
}

cmd_fetch() {
  if lib_complete; then
    log "jars already present in $LIB_DIR"
    return 0
  fi
  need mvn "Maven is required to fetch the Kafka jars"
  need sha256sum "coreutils"
  mkdir -p "$KAFKA_HOME"
  local tmp="$KAFKA_HOME/lib.tmp.$$"
  rm -rf "$tmp"
  log "fetching Kafka jars with Maven (pom: $POM) ..."
  local start=$SECONDS
  # shellcheck disable=SC2086
  if ! mvn -B -q -f "$POM" $KAFKA_MVN_ARGS dependency:copy-dependencies \
        -DoutputDirectory="$tmp" -DincludeScope=runtime >"$KAFKA_HOME/fetch.log" 2>&1; then
    tail -n 40 "$KAFKA_HOME/fetch.log" >&2 || true
    rm -rf "$tmp"
    die "mvn dependency:copy-dependencies failed (full output: $KAFKA_HOME/fetch.log)"
  fi
  compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || { rm -rf "$tmp"; die "kafka_2.13 jar missing after fetch"; }
  pom_digest >"$tmp/.complete"
  rm -rf "$LIB_DIR"
  mv "$tmp" "$LIB_DIR"
  log "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars into $LIB_DIR in $((SECONDS - start))s"
}

classpath() { printf '%s/*' "$LIB_DIR"; }

# Run a Kafka CLI tool class quietly (tool logging goes to stderr at WARN),
# bounded by KAFKA_TOOL_TIMEOUT seconds so a wedged broker cannot hang us.
run_tool() {
  local cls="$1"; shift
  timeout -k 5 "${KAFKA_TOOL_TIMEOUT:-60}" "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$CONF_DIR/tools-log4j2.properties" \
    -cp "$(classpath)" "$cls" "$@"
}

read_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(tr -dc '0-9' <"$PID_FILE")"
  [[ -n "$pid" ]] || return 1
  printf '%s' "$pid"
}

# Our broker is running iff the pid file names a live process whose command line is kafka.Kafka.
running_pid() {
  local pid
  pid="$(read_pid)" || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r "/proc/$pid/cmdline" ]]; then
    local cmdline
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    [[ "$cmdline" == *" $MAIN_CLASS "* ]] || return 1
  fi
  printf '%s' "$pid"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A real client round trip: Admin listTopics through the client listener.
broker_answers() {
  KAFKA_TOOL_TIMEOUT=25 run_tool org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$BOOTSTRAP" --command-config "$CONF_DIR/tools-client.properties" \
    --list >/dev/null 2>&1
}

# The group coordinator answers: FindCoordinator creates the offsets topic, and a group's
# describe is answered (here: "not found") only once its partition is loaded. Without this
# wait the first consumer group of a run raced that creation: at load 17-20 two of a CI run's
# first Kafka tests saw no assignment within 120 s ("NotCoordinatorError").
coordinator_answers() {
  KAFKA_TOOL_TIMEOUT=25 run_tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
    --bootstrap-server "$BOOTSTRAP" --command-config "$CONF_DIR/tools-client.properties" \
    --describe --group retrylens-ready 2>&1 | grep -q "GroupIdNotFound\|does not exist"
}

wait_coordinator() {
  local start=$SECONDS deadline=$((SECONDS + 60))
  while (( SECONDS < deadline )); do
    if coordinator_answers; then
      log "group coordinator ready after $((SECONDS - start))s"
      return 0
    fi
    sleep 0.5
  done
  log "group coordinator not ready within 60s; going on (consumers retry FindCoordinator)"
}

write_config() {
  mkdir -p "$CONF_DIR" "$LOG_DIR" "$RUN_DIR" "$KAFKA_DATA_DIR"
  cat >"$SERVER_PROPS" <<EOF
# Generated by infra/kafka/kafka.sh - edits are overwritten on every start.
# Single node, combined broker + controller, KRaft (no ZooKeeper).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${KAFKA_CONTROLLER_PORT}
listeners=PLAINTEXT://127.0.0.1:${KAFKA_PORT},CONTROLLER://127.0.0.1:${KAFKA_CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://127.0.0.1:${KAFKA_PORT}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=${KAFKA_DATA_DIR}
metadata.log.dir=${KAFKA_DATA_DIR}

# Test-friendly settings
num.partitions=4
default.replication.factor=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=4
group.initial.rebalance.delay.ms=0
# After a hard kill the restarted node must wait for its previous incarnation's
# session to expire before it is unfenced: keep that short (default 9000 ms).
broker.session.timeout.ms=${KAFKA_BROKER_SESSION_TIMEOUT_MS}
broker.heartbeat.interval.ms=1000
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=24
log.segment.bytes=104857600
log.retention.check.interval.ms=300000
EOF
  if [[ -n "$KAFKA_SASL" ]]; then write_sasl_config; elif [[ -n "$KAFKA_SSL_PORT" ]]; then die "KAFKA_SSL_PORT needs KAFKA_SASL=1"; fi
  if [[ -n "$KAFKA_EXTRA_CONFIG" ]]; then
    printf '\n# KAFKA_EXTRA_CONFIG\n%s\n' "$KAFKA_EXTRA_CONFIG" >>"$SERVER_PROPS"
  fi

  cat >"$CONF_DIR/log4j2.properties" <<EOF
# Broker logging: everything to \$KAFKA_HOME/logs/server.log
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = ${SERVER_LOG}
appender.file.filePattern = ${LOG_DIR}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
EOF

  cat >"$CONF_DIR/tools-log4j2.properties" <<'EOF'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
EOF

  cat >"$CONF_DIR/tools-client.properties" <<'EOF'
request.timeout.ms=5000
default.api.timeout.ms=10000
EOF
  if [[ -n "$KAFKA_SASL" ]]; then write_sasl_tools_config; fi
}

# ---- secured mode (KAFKA_SASL) --------------------------------------------------------
sasl_check_users() {
  local pair
  for pair in $KAFKA_SASL_USERS; do
    [[ "$pair" =~ ^[A-Za-z0-9_.-]+:[^[:space:]\"\;,=]+$ ]] \
      || die "KAFKA_SASL_USERS: '$pair' is not user:password (no spaces, quotes, ';', ',' or '=')"
    [[ "${pair%%:*}" != admin ]] || die "KAFKA_SASL_USERS: 'admin' is reserved (KAFKA_SASL_ADMIN_PASSWORD)"
  done
  [[ "$KAFKA_SASL_ADMIN_PASSWORD" =~ ^[^[:space:]\"\;,=]+$ ]] \
    || die "KAFKA_SASL_ADMIN_PASSWORD must not contain spaces, quotes, ';', ',' or '='"
}

# Appended to server.properties: later keys win, so the plain listener lines above are
# replaced rather than edited (the default config stays byte-identical).
write_sasl_config() {
  sasl_check_users
  local plain_users="user_admin=\"${KAFKA_SASL_ADMIN_PASSWORD}\"" pair
  for pair in $KAFKA_SASL_USERS; do
    plain_users+=" user_${pair%%:*}=\"${pair#*:}\""
  done
  local jaas_plain="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"${KAFKA_SASL_ADMIN_PASSWORD}\" ${plain_users};"
  local jaas_scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
  local listeners="SASL_PLAINTEXT://127.0.0.1:${KAFKA_PORT},CONTROLLER://127.0.0.1:${KAFKA_CONTROLLER_PORT}"
  local advertised="SASL_PLAINTEXT://127.0.0.1:${KAFKA_PORT}"
  local protocols="SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ -n "$KAFKA_SSL_PORT" ]]; then
    listeners+=",SASL_SSL://127.0.0.1:${KAFKA_SSL_PORT}"
    advertised+=",SASL_SSL://127.0.0.1:${KAFKA_SSL_PORT}"
    protocols+=",SASL_SSL:SASL_SSL"
  fi
  cat >>"$SERVER_PROPS" <<EOF

# KAFKA_SASL: one SASL_PLAINTEXT client listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
# also the inter-broker listener (PLAIN as admin); controller listener stays PLAINTEXT.
listeners=${listeners}
advertised.listeners=${advertised}
listener.security.protocol.map=${protocols}
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=${jaas_plain}
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=${jaas_scram}
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=${jaas_scram}
EOF
  if [[ -n "$KAFKA_SSL_PORT" ]]; then
    sasl_make_certificate
    cat >>"$SERVER_PROPS" <<EOF
listener.name.sasl_ssl.plain.sasl.jaas.config=${jaas_plain}
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=${jaas_scram}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=${jaas_scram}
listener.name.sasl_ssl.ssl.keystore.type=PKCS12
listener.name.sasl_ssl.ssl.keystore.location=${CONF_DIR}/tls/broker.p12
listener.name.sasl_ssl.ssl.keystore.password=$(cat "$CONF_DIR/tls/password")
EOF
  fi
  if [[ -n "$KAFKA_AUTHORIZER" ]]; then
    cat >>"$SERVER_PROPS" <<'EOF'
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
EOF
  fi
}

# A self-signed broker certificate (127.0.0.1 and localhost), made once and kept across
# starts so clients may keep trusting tls/ca.pem; 'reset' deletes it.
sasl_make_certificate() {
  local dir="$CONF_DIR/tls"
  [[ -s "$dir/broker.p12" && -s "$dir/ca.pem" && -s "$dir/password" ]] && return 0
  need keytool "the JDK's keytool makes the TLS certificate"
  mkdir -p "$dir"
  chmod 700 "$dir"
  rm -f "$dir/broker.p12" "$dir/ca.pem"
  head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$dir/password"
  local password
  password="$(cat "$dir/password")"
  keytool -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 3650 \
    -dname "CN=127.0.0.1" -ext "SAN=IP:127.0.0.1,DNS:localhost" -ext "BC:c=ca:true" \
    -keystore "$dir/broker.p12" -storetype PKCS12 -storepass "$password" -keypass "$password" \
    >"$LOG_DIR/keytool.log" 2>&1 || { cat "$LOG_DIR/keytool.log" >&2; die "keytool -genkeypair failed"; }
  keytool -exportcert -rfc -alias broker -keystore "$dir/broker.p12" -storepass "$password" \
    -file "$dir/ca.pem" >>"$LOG_DIR/keytool.log" 2>&1 || die "keytool -exportcert failed"
  chmod 600 "$dir/password" "$dir/broker.p12"
  log "made a self-signed TLS certificate: clients trust $dir/ca.pem"
}

write_sasl_tools_config() {
  cat >>"$CONF_DIR/tools-client.properties" <<EOF
security.protocol=SASL_PLAINTEXT
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="${KAFKA_SASL_ADMIN_PASSWORD}";
EOF
  chmod 600 "$CONF_DIR/tools-client.properties" "$SERVER_PROPS"
}

# kafka-storage format arguments that create every user's SCRAM credentials.
sasl_format_args() {
  [[ -n "$KAFKA_SASL" ]] || return 0
  local pair mech
  for pair in "admin:$KAFKA_SASL_ADMIN_PASSWORD" $KAFKA_SASL_USERS; do
    for mech in SCRAM-SHA-256 SCRAM-SHA-512; do
      printf '%s\n' --add-scram "${mech}=[name=${pair%%:*},password=${pair#*:}]"
    done
  done
}
# ---- end of secured mode --------------------------------------------------------------

format_storage() {
  if [[ -f "$KAFKA_DATA_DIR/meta.properties" ]]; then
    log "storage already formatted: $KAFKA_DATA_DIR"
    return 0
  fi
  local cluster_id
  cluster_id="$(run_tool kafka.tools.StorageTool random-uuid)" || die "could not generate a cluster id"
  cluster_id="$(printf '%s' "$cluster_id" | tail -n 1 | tr -d '[:space:]')"
  log "formatting $KAFKA_DATA_DIR (cluster id $cluster_id)"
  # Static quorum (controller.quorum.voters) => no --standalone / --initial-controllers.
  local -a sasl_args=()
  mapfile -t sasl_args < <(sasl_format_args)
  run_tool kafka.tools.StorageTool format --config "$SERVER_PROPS" \
    --cluster-id "$cluster_id" --ignore-formatted "${sasl_args[@]}" >"$LOG_DIR/format.log" 2>&1 \
    || { cat "$LOG_DIR/format.log" >&2; die "kafka-storage format failed"; }
}

show_log_tail() {
  local f
  for f in "$SERVER_LOG" "$STDOUT_LOG"; do
    if [[ -s "$f" ]]; then
      log "---- last lines of $f ----"
      tail -n 60 "$f" >&2 || true
    fi
  done
}

cmd_start() {
  need "$JAVA" "install a JDK >= 17"
  need timeout "coreutils"
  local pid
  if pid="$(running_pid)"; then
    log "broker already running (pid $pid); checking it answers on $BOOTSTRAP"
    wait_ready "$pid"
    return 0
  fi
  rm -f "$PID_FILE"
  if port_open "$KAFKA_PORT"; then
    die "port $KAFKA_PORT on 127.0.0.1 is already in use by another process (set KAFKA_PORT)"
  fi
  if port_open "$KAFKA_CONTROLLER_PORT"; then
    die "port $KAFKA_CONTROLLER_PORT on 127.0.0.1 is already in use by another process (set KAFKA_CONTROLLER_PORT)"
  fi

  cmd_fetch
  write_config
  format_storage

  log "starting broker on $BOOTSTRAP (controller 127.0.0.1:$KAFKA_CONTROLLER_PORT, data $KAFKA_DATA_DIR)"
  : >>"$STDOUT_LOG"
  # shellcheck disable=SC2086
  local -a jvm=(
    $KAFKA_HEAP_OPTS
    -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
    -Dkafka.logs.dir="$LOG_DIR"
    -Dlog4j2.configurationFile="$CONF_DIR/log4j2.properties"
    -cp "$(classpath)"
  )
  # New session (setsid) so the broker survives the caller's terminal/process group;
  # the wrapper writes its own pid and then exec's java, so the pid file is exact.
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
    "$JAVA" "${jvm[@]}" "$MAIN_CLASS" "$SERVER_PROPS" \
    </dev/null >>"$STDOUT_LOG" 2>&1 &
  local waited=0
  while [[ ! -s "$PID_FILE" ]] && (( waited < 50 )); do sleep 0.1; waited=$((waited + 1)); done
  pid="$(read_pid)" || die "broker did not write its pid file"
  wait_ready "$pid"
}

wait_ready() {
  local pid="$1" start=$SECONDS deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  while (( SECONDS < deadline )); do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_log_tail
      rm -f "$PID_FILE"
      die "broker process $pid exited during startup"
    fi
    if port_open "$KAFKA_PORT" && broker_answers; then
      log "broker ready on $BOOTSTRAP (pid $pid) after $((SECONDS - start))s"
      wait_coordinator
      return 0
    fi
    sleep 0.5
  done
  show_log_tail
  log "broker (pid $pid) not ready on $BOOTSTRAP within ${KAFKA_START_TIMEOUT}s; stopping it"
  cmd_stop
  die "broker did not become ready within ${KAFKA_START_TIMEOUT}s (KAFKA_START_TIMEOUT)"
}

cmd_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    log "broker not running"
    return 0
  fi
  log "stopping broker (pid $pid, SIGTERM)"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
  while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "broker still alive after ${KAFKA_STOP_TIMEOUT}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$PID_FILE"
  log "broker stopped"
}

cmd_kill() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    log "broker not running"
    return 0
  fi
  log "killing broker (pid $pid, SIGKILL)"
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$PID_FILE"
}

cmd_status() {
  local pid
  if ! pid="$(running_pid)"; then
    log "not running"
    return 1
  fi
  if port_open "$KAFKA_PORT" && broker_answers; then
    log "running (pid $pid) and reachable on $BOOTSTRAP"
    return 0
  fi
  log "running (pid $pid) but NOT reachable on $BOOTSTRAP"
  return 2
}

cmd_reset() {
  cmd_stop
  log "deleting data dir $KAFKA_DATA_DIR and logs $LOG_DIR (jars kept)"
  rm -rf "$KAFKA_DATA_DIR" "$LOG_DIR" "$RUN_DIR" "$CONF_DIR"
}

cmd_logs() {
  [[ -f "$SERVER_LOG" ]] || die "no server log at $SERVER_LOG"
  tail -n "${1:-100}" "$SERVER_LOG"
}

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
}

main() {
  local sub="${1:-}"
  shift || true
  case "$sub" in
    fetch)   cmd_fetch ;;
    start)   cmd_start ;;
    stop)    cmd_stop ;;
    status)  cmd_status ;;
    restart) cmd_stop; cmd_start ;;
    kill)    cmd_kill ;;
    reset)   cmd_reset ;;
    logs)    cmd_logs "$@" ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"

# shellcheck shell=sh
# Checks of the smcrun VM test bed, sourced by /init (busybox sh) in the guest. Each check_NAME runs in
# a subshell under a watchdog; it ends with `ok` or `fail "one-line reason"`. Nothing here mocks the
# kernel: every check asserts behaviour the guest's real SMC kernel showed, and can fail.
# Needs from init: say, vmlog, $role.

SETUP_ERR=
RXE=
SMCR_PORT=6379

# ------------------------------------------------------------------ plumbing
fail() {
    printf '%s\n' "$*" | head -n1 > /tmp/check.reason
    exit 1
}
ok() { exit 0; }
# first line of a command's output, for error messages
first() { printf '%s\n' "$1" | grep -v '^[[:space:]]*$' | head -n1 | cut -c1-200; }
lastl() { printf '%s\n' "$1" | grep -v '^[[:space:]]*$' | tail -n1 | cut -c1-200; }

# run_check NAME: runs check_NAME under a watchdog and reports @@PASS/@@FAIL on ttyS1.
run_check() {
    name=$1
    fn=check_$(echo "$name" | tr '-' '_')
    limit=${CHECK_TIMEOUT:-90}
    rm -f /tmp/check.reason /tmp/check.pids
    (
        exec > "/tmp/$name.log" 2>&1
        "$fn"
    ) &
    cpid=$!
    (sleep "$limit" && echo "timed out after ${limit}s" > /tmp/check.reason && kill -9 "$cpid") 2>/dev/null &
    wpid=$!
    wait "$cpid"
    rc=$?
    kill "$wpid" 2>/dev/null
    wait "$wpid" 2>/dev/null
    cleanup_procs
    sed "s/^/@@LOG $name: /" "/tmp/$name.log" >&3
    if [ "$rc" = 0 ]; then
        say "@@PASS $name"
    else
        reason=$(cat /tmp/check.reason 2>/dev/null)
        say "@@FAIL $name: ${reason:-exited $rc without a reason}"
    fi
}

# background processes a check started: bg CMD... (pid recorded, killed after the check)
bg() {
    "$@" &
    echo $! >> /tmp/check.pids
}
cleanup_procs() {
    if [ -e /tmp/check.pids ]; then
        for p in $(cat /tmp/check.pids); do kill "$p" 2>/dev/null; done
        sleep 0.2
        for p in $(cat /tmp/check.pids); do kill -9 "$p" 2>/dev/null; done
        rm -f /tmp/check.pids
    fi
    # no stray servers between checks
    killall -9 redis-server redis-benchmark redis-cli 2>/dev/null
    return 0
}

# send a guest file to the host: send_file NAME PATH
send_file() {
    say "@@FILE $1"
    base64 < "$2" >&3
    say "@@ENDFILE $1"
}

# ------------------------------------------------------------------ SMC set-up (by smcrun itself)
setup_smc() {
    netdev=$1
    RXE=rxe_$netdev
    out=$(smcrun setup soft-roce --netdev "$netdev" --name "$RXE" 2>&1)
    rc=$?
    vmlog "smcrun setup soft-roce --netdev $netdev --name $RXE: rc=$rc $(first "$out")"
    if [ $rc != 0 ]; then
        SETUP_ERR="smcrun setup soft-roce --netdev $netdev failed (rc $rc): $(first "$out")"
        return
    fi
    if [ ! -e "/sys/class/infiniband/$RXE" ]; then
        SETUP_ERR="smcrun setup soft-roce exited 0 but /sys/class/infiniband/$RXE does not exist"
        return
    fi
    if [ "$BREAK" = no-ueid ]; then
        vmlog "SMCRUN_VM_BREAK=no-ueid: deliberately not adding a UEID"
    else
        out=$(smcrun ueid add SMCRUN-TEST 2>&1)
        rc=$?
        vmlog "smcrun ueid add SMCRUN-TEST: rc=$rc $(first "$out")"
        if [ $rc != 0 ]; then
            SETUP_ERR="smcrun ueid add SMCRUN-TEST failed (rc $rc): $(first "$out")"
            return
        fi
        show=$(smcrun ueid show 2>&1)
        case $show in
        *SMCRUN-TEST*) ;;
        *) SETUP_ERR="smcrun ueid show does not list SMCRUN-TEST after adding it: $(first "$show")" ;;
        esac
    fi
}
need_setup() {
    [ -z "$SETUP_ERR" ] || fail "set-up: $SETUP_ERR"
}
need_prog() {
    for p in "$@"; do
        command -v "$p" > /dev/null 2>&1 || fail "$p is not in the guest (not built?)"
    done
}

# ------------------------------------------------------------------ telemetry through smcrun
# stats_snap FILE: `smcrun stats --json` into FILE
stats_snap() {
    out=$(smcrun stats --json 2>&1 > "$1") || fail "smcrun stats --json failed: $(first "$out")"
    jq -e . "$1" > /dev/null 2>&1 || fail "smcrun stats --json printed no JSON: $(first "$(cat "$1")")"
}
# stat FILE KEY: one counter of a stats snapshot (see STATS_JQ for the keys)
STATS_JQ='
def n: if . == null then 0 else . end;
def smcr: (.smcr // .SMCR // {});
{
  clnt_succ: ((smcr.clnt_v1_succ_cnt|n) + (smcr.clnt_v2_succ_cnt|n)),
  srv_succ: ((smcr.srv_v1_succ_cnt|n) + (smcr.srv_v2_succ_cnt|n)),
  clnt_fback: (.fallback.clnt_cnt // .fback.clnt_cnt | n),
  srv_fback: (.fallback.srv_cnt // .fback.srv_cnt | n),
  clnt_hs_err: (.clnt_hs_err_cnt | n),
  srv_hs_err: (.srv_hs_err_cnt | n),
  rx_bytes: (smcr.rx_bytes | n),
  tx_bytes: (smcr.tx_bytes | n)
}'
stat() {
    v=$(jq -r "$STATS_JQ | .$2" "$1" 2>&1) || fail "cannot read $2 from smcrun stats --json: $(first "$v")"
    echo "$v"
}
# stats_delta BEFORE AFTER KEY
stats_delta() {
    a=$(stat "$1" "$3")
    b=$(stat "$2" "$3")
    echo $((b - a))
}

# ss_snap FILE [-a]: `smcrun ss [-a] --json` into FILE, normalised by SS_JQ to one object per socket:
#   {state, mode ("SMCR"|"SMCD"|"TCP"), family, lport, rport, laddr, raddr, reason, peer_reason}
ss_snap() {
    f=$1
    shift
    out=$(smcrun ss "$@" --json 2>&1 > "$f.raw") || fail "smcrun ss $* --json failed: $(first "$out")"
    jq -e . "$f.raw" > /dev/null 2>&1 || fail "smcrun ss --json printed no JSON: $(first "$(cat "$f.raw")")"
    jq -c "$SS_JQ" "$f.raw" > "$f" 2>&1 || fail "cannot read smcrun ss --json: $(first "$(cat "$f")")"
}
SS_JQ='
(if type == "array" then . else (.sockets // []) end)[] |
{
  state: (.state // ""),
  mode: (.mode // ""),
  family: (.family // ""),
  lport: (.local_port // .lport // (.local // "" | tostring | split(":") | last | tonumber? ) // 0),
  rport: (.peer_port // .rport // (.peer // "" | tostring | split(":") | last | tonumber? ) // 0),
  laddr: (.local_addr // .local // ""),
  raddr: (.peer_addr // .peer // ""),
  reason: (.fallback.reason // .reason // null),
  peer_reason: (.fallback.peer_diagnosis // .peer_diagnosis // null)
}'
# ss_count FILE JQ-FILTER: how many normalised sockets match
ss_count() {
    jq -s "[.[] | select($2)] | length" "$1"
}

# ------------------------------------------------------------------ redis helpers
# redis_up PORT [HOST] [SMCRUN-ARGS]: wait until an smcrun redis-cli PING answers
redis_wait() {
    port=$1 host=${2:-127.0.0.1}
    i=0
    while [ $i -lt 100 ]; do
        [ "$(redis-cli -h "$host" -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.2
        i=$((i + 1))
    done
    fail "redis-server on $host:$port did not answer PING within 20s: $(lastl "$(cat /tmp/redis.log 2>/dev/null)")"
}

# ------------------------------------------------------------------ checks
# 1. demo: smcrun demo reports SMC-R; the kernel's SMC stats grew by its connection count, no fallback.
check_demo() {
    need_setup
    stats_snap /tmp/demo.s0
    out=$(smcrun demo 2>&1)
    rc=$?
    printf '%s\n' "$out"
    stats_snap /tmp/demo.s1
    [ $rc = 0 ] || fail "smcrun demo exited $rc: $(lastl "$out")"
    conns=$(printf '%s\n' "$out" | grep -cE 'SMC-R|SMC-D|TCP')
    smcr=$(printf '%s\n' "$out" | grep -c 'SMC-R')
    [ "$conns" -gt 0 ] || fail "smcrun demo printed no connection lines: $(lastl "$out")"
    [ "$smcr" = "$conns" ] || fail "smcrun demo: only $smcr of $conns connections SMC-R: $(printf '%s\n' "$out" | grep -E 'SMC-D|TCP' | head -n1)"
    dc=$(stats_delta /tmp/demo.s0 /tmp/demo.s1 clnt_succ)
    ds=$(stats_delta /tmp/demo.s0 /tmp/demo.s1 srv_succ)
    dfc=$(stats_delta /tmp/demo.s0 /tmp/demo.s1 clnt_fback)
    dfs=$(stats_delta /tmp/demo.s0 /tmp/demo.s1 srv_fback)
    echo "demo: $conns connections, stats delta client succ $dc server succ $ds fallback client $dfc server $dfs"
    [ "$dfc" = 0 ] && [ "$dfs" = 0 ] || fail "kernel fallback counters grew (client +$dfc, server +$dfs)"
    [ "$dc" = "$conns" ] && [ "$ds" = "$conns" ] ||
        fail "kernel SMC-R successes grew by client +$dc server +$ds, expected +$conns each"
    ok
}

check_redis() { fail "not written yet"; }
check_modes() { fail "not written yet"; }
check_fallback() { fail "not written yet"; }
check_integrity() { fail "not written yet"; }
check_fixtures() { fail "not written yet"; }
check_two_vms() { fail "not written yet"; }

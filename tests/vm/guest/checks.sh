# shellcheck shell=dash
# Checks of the smcrun VM test bed, sourced by /init (busybox sh) in the guest. Each check_NAME runs in
# a subshell under a watchdog; it ends with `ok` or `fail "one-line reason"`. Nothing here mocks the
# kernel: every check asserts behaviour the guest's real SMC kernel showed, and can fail.
# smcrun's JSON is read by vmcheck (tests/vm/check), one question a call, into the views' own types.
# Needs from init: say, vmlog, $role.
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2013,SC2154
# (SC2015: `[ a ] && [ b ] || fail` means "fail unless both", as intended; SC2086: prefixes such as
# $clipre (empty or "smcrun") are split on purpose, other unquoted values are fixed words; SC2016:
# awk programs in single quotes; SC2013: pid/word lists;
# SC2154: $role is set by init.)

SETUP_ERR=
RXE=
NO_UEID=

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
    [ "$name" = two-vms ] && limit=150
    [ "$name" = policy ] && limit=200
    case $name in bpf-*) limit=180 ;; esac # each BPF load takes seconds under TCG
    # An area's checks-AREA.sh may give a check more time: CHECK_LIMIT_<name with _ for ->=SECONDS.
    eval "limit=\${CHECK_LIMIT_$(echo "$name" | tr '-' '_'):-$limit}"
    rm -f /tmp/check.reason /tmp/check.pids
    t0=$(date +%s)
    (
        exec > "/tmp/$name.log" 2>&1
        "$fn"
    ) &
    cpid=$!
    # (its sleep goes with it when the check ends in time: a stray sleep is no state to leave behind)
    (
        trap 'kill "$spid" 2> /dev/null; exit 0' TERM
        sleep "$limit" &
        spid=$!
        wait "$spid" && echo "timed out after ${limit}s" > /tmp/check.reason && kill -9 "$cpid"
    ) 2>/dev/null &
    wpid=$!
    wait "$cpid"
    rc=$?
    kill "$wpid" 2>/dev/null
    wait "$wpid" 2>/dev/null
    cleanup_procs
    modules_back >> "/tmp/$name.log"
    reset_state >> "/tmp/$name.log"
    echo "($name took $(($(date +%s) - t0))s)" >> "/tmp/$name.log"
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
    local p
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

# ------------------------------------------------------------------ a known state between checks
# Every check starts from the state the set-up made and leaves it so (a check must not pass or fail
# for what the one before it left behind): no process of its own alive, no SMC socket open, nothing
# BPF attached, the set-up's UEID, soft-RoCE device and net.smc sysctls in place. state_mark (after
# the set-up) records that state; reset_state (after each check) brings the guest back to it and
# says on stdout, for the check's log, whatever it had to put right.
state_mark() {
    BASE_PIDS=" $(cd /proc && echo [0-9]*) "
    BASE_SYSCTLS=
    local f v
    for f in /proc/sys/net/smc/*; do
        [ -w "$f" ] && read -r v < "$f" && BASE_SYSCTLS="$BASE_SYSCTLS $f=$v"
    done
}
# strays: the processes started since state_mark that are still alive (not kernel threads: those
# have an empty command line), as "pid:name" words; no subshell, so none of them is this shell's.
strays() {
    local d p c name
    STRAYS=
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        case $BASE_PIDS in *" $p "*) continue ;; esac
        [ "$p" = $$ ] && continue
        c=
        read -r c < "$d/cmdline" 2> /dev/null
        [ -n "$c" ] || continue
        name=
        read -r name < "$d/comm" 2> /dev/null
        STRAYS="$STRAYS $p:$name"
    done
}
# lgr_conns: how many connections the link groups still count, or "?" when it cannot be read. A
# closing SMC socket leaves smc_diag's list (and /proc/net/protocols' count) when it is unhashed,
# but keeps its connection in its link group, and the smc module, until it is freed.
# A kernel without link groups over netlink (5.10: `smcrun linkgroup` exits 125) has none to count.
lgr_conns() {
    local out
    smcrun linkgroup --json > /tmp/lgr.json 2> /dev/null || { echo 0; return; }
    out=$(vmcheck linkgroup-idle /tmp/lgr.json)
    case ${out%% *} in
    '' | *[!0-9]*) echo "?" ;;
    *) echo "${out%% *}" ;;
    esac
}
# rxe_recycle: removes the soft-RoCE device and adds it again, then waits until smc sees it active.
# (Its link groups go with it, and the connections they still counted.)
rxe_recycle() {
    local i=0
    smcrun setup soft-roce --netdev "${RXE#rxe_}" --name "$RXE" --remove > /dev/null 2>&1 || return 1
    smcrun setup soft-roce --netdev "${RXE#rxe_}" --name "$RXE" > /dev/null 2>&1 || return 1
    vmcheck --wait 100 device-active "$RXE" > /dev/null || return 1
    # The first link group on the new device, made here, not by the next check's first connection:
    # under TCG on a loaded host it can time out confirming its QP (server 0x02010000: the kernel's
    # wait; seen once right after a recycle, failing the next check). A few tries until one
    # connection runs over SMC-R.
    for i in 1 2 3; do
        smcrun demo --json --connections 1 --bytes 4k > /tmp/recycle.demo 2> /dev/null
        vmcheck demo-smcr /tmp/recycle.demo 2 > /dev/null && return 0
    done
    return 1
}
# smc_drain [SECONDS]: waits (default 30 s) until no SMC socket is left, neither listed by smc_diag
# nor counted in a link group; 1 when some still are. DRAINED says how long it took; RECYCLED how
# many connections were still in link groups 5 s after every socket was gone.
#   Such connections are the kernel's: on 6.12 an SMC-R connection closed with data it had not read
# (the soak's `unread` case: 10 of 12) stays in its link group, holding the smc module (refcount
# 14 for 10), for as long as it was watched (35 s); removing the RDMA device frees them (refcount
# back to 1), and SMC-R works at once on the device made again (tests/vm/README.md). So the test bed
# does that, with soft-RoCE, and says so.
smc_drain() {
    local t0 stuck=0 n
    t0=$(date +%s)
    DRAINED=0 RECYCLED=0
    grep -q '^smc ' /proc/modules || return 0
    while :; do
        n=$(lgr_conns)
        # (smc_diag lists a socket, in any state; or cannot be read)
        if grep -q '^smc_diag ' /proc/modules && ! vmcheck ss-empty > /dev/null; then
            stuck=0
        elif [ "$n" = 0 ]; then
            break
        else
            # (each look runs smcrun twice: seconds under TCG, so time is counted, not looks)
            [ $stuck = 0 ] && stuck=$(date +%s)
            if [ $(($(date +%s) - stuck)) -ge 5 ] && [ -n "$RXE" ] && [ "$RECYCLED" = 0 ]; then
                RECYCLED=$n
                rxe_recycle || return 1
                continue
            fi
        fi
        [ $(($(date +%s) - t0)) -ge "${1:-30}" ] && return 1
        sleep 0.2
    done
    DRAINED=$(($(date +%s) - t0))
}
reset_state() {
    local w p i=0 n f v
    strays
    # (a moment for what is on its way out by itself: BPF mode's holder ends with its tree)
    while [ -n "$STRAYS" ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); strays; done
    i=0
    if [ -n "$STRAYS" ]; then
        echo "(state: processes left running, killed:$STRAYS)"
        for w in $STRAYS; do kill -9 "${w%%:*}" 2> /dev/null; done
        while strays && [ -n "$STRAYS" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        [ -z "$STRAYS" ] || echo "(state: still alive after kill -9:$STRAYS)"
    fi
    if ! smc_drain 30; then
        echo "(state: SMC sockets still open 30 s after the check's processes ended:" \
            "$(smcrun ss -a 2>&1 | head -n 12 | tr '\n' ';') link groups count $(lgr_conns) connections)"
    elif [ "$DRAINED" -ge 3 ]; then
        echo "(state: the check's SMC sockets took ${DRAINED} s to close)"
    fi
    [ "$RECYCLED" = 0 ] || echo "(state: $RECYCLED SMC-R connections stayed in their link groups after their sockets closed" \
        "(closed with unread data: the kernel keeps them): $RXE removed and made again)"
    # (a kernel without BPF mode's support cannot list: nothing to say then)
    if [ -d /sys/fs/bpf ] && smcrun attach --list --json > /dev/null 2>&1 && ! n=$(vmcheck bpf-nothing-attached); then
        echo "(state: BPF mode left something attached: $n; $(smcrun attach --list 2>&1 | tr '\n' ';'))"
    fi
    for f in $BASE_SYSCTLS; do
        read -r v < "${f%%=*}" 2> /dev/null
        [ "$v" = "${f#*=}" ] && continue
        echo "(state: ${f%%=*} was left at $v: set back to ${f#*=})"
        echo "${f#*=}" > "${f%%=*}"
    done
    if [ -n "$RXE" ] && [ -z "$SETUP_ERR" ] && [ ! -e "/sys/class/infiniband/$RXE" ]; then
        echo "(state: the soft-RoCE device $RXE is gone)"
    fi
    if [ -z "$SETUP_ERR" ] && [ -z "$NO_UEID" ] && [ "$BREAK" != no-ueid ] && grep -q '^smc ' /proc/modules &&
        ! smcrun ueid show 2> /dev/null | grep -q SMCRUN-TEST; then
        echo "(state: the UEID SMCRUN-TEST was gone: added again)"
        smcrun ueid add SMCRUN-TEST > /dev/null 2>&1
    fi
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
    case $KERNEL in
    5.10 | 6.1)
        # SMC-R over soft-RoCE does not work on these kernels (6.1 falls back with NOSMCDEV, and with a
        # pnet entry hangs in smc_wr_drain_cq; 5.10 has no SMC-Rv2 and no UEIDs): no soft-RoCE, no UEID,
        # no pnet entry. Their suite proves the fallback path and the views on the older ABI.
        NO_UEID=1
        vmlog "kernel $KERNEL: no soft-RoCE, no UEID (SMC's fallback path and views only)"
        return
        ;;
    esac
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
# Remove the set-up's UEID for a no-UEID case, and put back exactly what the set-up had (nothing when
# SMCRUN_VM_BREAK=no-ueid, so a broken set-up stays broken for the checks that follow).
ueid_drop() {
    local o
    if [ "$BREAK" != no-ueid ]; then
        o=$(smcrun ueid del SMCRUN-TEST 2>&1) || fail "smcrun ueid del SMCRUN-TEST failed: $(first "$o")"
    fi
    o=$(smcrun ueid show 2>&1)
    case $o in *SMCRUN-TEST*) fail "smcrun ueid show still lists SMCRUN-TEST after deleting it" ;; esac
}
ueid_restore() {
    local o
    [ "$BREAK" = no-ueid ] && return 0
    o=$(smcrun ueid add SMCRUN-TEST 2>&1) || fail "smcrun ueid add SMCRUN-TEST (restoring it) failed: $(first "$o")"
}
# smc_unload: unloads smc_diag and smc, trying for up to 20 s: after their owners exit, closing SMC
# sockets and released BPF links still hold the module for a moment. On failure (1) the last error
# is in /tmp/smc.rmmod.
smc_unload() {
    local i=0
    # Each open SMC socket holds the module (a closing one too, until its close handshake ends):
    # wait for them first, and say which are left if they do not go.
    if ! smc_drain 60; then
        echo "SMC sockets still open after 60 s: $(smcrun ss -a 2>&1 | head -n 8 | tr '\n' ';'); the link groups count $(lgr_conns) connections" > /tmp/smc.rmmod
        echo "smc_unload: $(cat /tmp/smc.rmmod)"
        return 1
    fi
    while ! { rmmod smc_diag 2> /dev/null || ! grep -q '^smc_diag ' /proc/modules; } || ! rmmod smc 2> /tmp/smc.rmmod; do
        i=$((i + 1))
        [ $i -gt 100 ] && {
            # What still holds it, on the line the check's failure shows: the module's reference
            # count, the SMC sockets the protocols still count (closing ones smc_diag no longer
            # lists too) and the link groups.
            echo "$(first "$(cat /tmp/smc.rmmod)"); smc_diag lists no socket; refcnt $(cat /sys/module/smc/refcnt 2> /dev/null);" \
                "$(grep '^smc' /proc/modules | cut -d' ' -f1,3,4 | tr '\n' ' ');" \
                "sockets counted by /proc/net/protocols: $(awk '$1 ~ /^SMC/ { printf "%s %s ", $1, $3 }' /proc/net/protocols);" \
                "link groups: $(smcrun linkgroup 2>&1 | tail -n +2 | tr -s ' \n' ' ' | cut -c1-160)" > /tmp/smc.rmmod.why
            mv /tmp/smc.rmmod.why /tmp/smc.rmmod
            echo "smc_unload: $(cat /tmp/smc.rmmod)"
            return 1
        }
        sleep 0.2
    done
}
# smc_reload: loads whichever of smc and smc_diag is missing, puts the set-up's UEID back and waits
# until smc sees the soft-RoCE device active (it reads the port state asynchronously). Never exits:
# on failure (1) it prints why, so that run_check can use it between checks as well.
smc_reload() {
    local m i=0
    for m in smc smc_diag; do
        grep -q "^$m " /proc/modules && continue
        insmod "/vm/lib/modules/$m.ko" 2> /tmp/smc.insmod || { echo "insmod $m: $(first "$(cat /tmp/smc.insmod)")"; return 1; }
    done
    if [ -z "$NO_UEID" ] && [ "$BREAK" != no-ueid ] && ! smcrun ueid show 2> /dev/null | grep -q SMCRUN-TEST; then
        smcrun ueid add SMCRUN-TEST > /tmp/smc.insmod 2>&1 || { echo "smcrun ueid add SMCRUN-TEST: $(first "$(cat /tmp/smc.insmod)")"; return 1; }
    fi
    [ -n "$RXE" ] || return 0
    vmcheck --wait 100 device-active "$RXE" > /tmp/smc.insmod || { echo "smc does not see $RXE active: $(first "$(cat /tmp/smc.insmod)")"; return 1; }
}
# modules_back: after a check, loads smc and smc_diag again if the check left them unloaded (a
# check that unloads them and then fails must not fail every later check with it).
modules_back() {
    local out
    [ -e /vm/lib/modules/smc.ko ] || return 0
    grep -q '^smc ' /proc/modules && grep -q '^smc_diag ' /proc/modules && return 0
    out=$(smc_reload) && echo "(smc or smc_diag was left unloaded: loaded again)" || echo "(loading smc again after the check failed: $out)"
}
# without_ueid CMD...: CMD in a subshell with the set-up's UEID removed, then the UEID put back; the
# check fails (with CMD's reason) when CMD did.
without_ueid() {
    local rc
    ueid_drop
    ( "$@" )
    rc=$?
    ueid_restore
    [ $rc = 0 ] || exit 1
}
# ueid_hint [WHY]: for a failure message, when no UEID is set: says so (and why one is needed)
ueid_hint() {
    case $(smcrun ueid show 2>&1) in
    *SMCRUN-TEST*) ;;
    *) echo " (no UEID is set${1:+: $1}; the set-up's \`smcrun ueid add\` did not run)" ;;
    esac
}
need_setup() {
    [ -z "$SETUP_ERR" ] || fail "set-up: $SETUP_ERR"
}
need_prog() {
    local p
    for p in "$@"; do
        command -v "$p" > /dev/null 2>&1 || fail "$p is not in the guest (not built?)"
    done
}

# ------------------------------------------------------------------ telemetry through smcrun
# stats_snap FILE: `smcrun stats --json` into FILE
stats_snap() {
    local _o
    _o=$(smcrun stats --json 2>&1 > "$1") || fail "smcrun stats --json failed: $(first "$_o")"
    # (a cheap look: vmcheck reads it later, into the stats view's own type)
    [ "$(head -c1 "$1")" = "{" ] || fail "smcrun stats --json printed no JSON: $(first "$(cat "$1")")"
}
# stats_delta BEFORE AFTER KEY: how much one SMC-R counter grew between two stats snapshots; KEY:
#   clnt_succ, srv_succ (successes), clnt_fback, srv_fback (fallbacks), rx_bytes, tx_bytes
stats_delta() {
    local v
    v=$(vmcheck stats-count "$1" "$2" "$3" 2>&1) || fail "cannot read $3 from smcrun stats --json: $(first "$v")"
    echo "$v"
}
# fallback_deltas BEFORE AFTER: dfc and dfs, how much the kernel's client and server fallback
#   counters grew (the caller may print them before fallbacks_none judges them)
fallback_deltas() {
    dfc=$(stats_delta "$1" "$2" clnt_fback)
    dfs=$(stats_delta "$1" "$2" srv_fback)
}
# fallbacks_none: fails unless fallback_deltas found no fallback
fallbacks_none() {
    [ "$dfc" = 0 ] && [ "$dfs" = 0 ] || fail "kernel fallback counters grew (client +$dfc, server +$dfs)"
}
# no_fallback BEFORE AFTER: the kernel counted no fallback between two stats snapshots
no_fallback() {
    local o
    o=$(vmcheck stats-smc-only "$1" "$2" 0) || fail "$o"
}

# ------------------------------------------------------------------ redis helpers
redis_wait() { # redis_wait PORT [HOST [plain]]: PING until it answers (through smcrun unless "plain")
    local port host i pre
    port=$1 host=${2:-127.0.0.1} pre=smcrun
    [ "${3:-}" = plain ] && pre=
    i=0
    while [ $i -lt 100 ]; do
        [ "$($pre redis-cli -h "$host" -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.2
        i=$((i + 1))
    done
    fail "redis-server on $host:$port did not answer PING within 20s: $(lastl "$(cat /tmp/redis.log 2>/dev/null)")"
}

# redis_bg PORT: `smcrun redis-server` on PORT in the background (log /tmp/redis.log), answering PING
redis_bg() {
    bg smcrun redis-server --port "$1" --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait "$1"
}

# ------------------------------------------------------------------ checks
# exec: a developer's command (tests/vm/run --exec 'CMD'), run after the set-up; passes when it exits 0.
check_exec() {
    sh -c "$EXEC_CMD"
    rc=$?
    [ $rc = 0 ] || fail "--exec command exited $rc"
    ok
}

# 1. demo: smcrun demo reports SMC-R for every socket of its connections, its data came back intact, and
#    the kernel's SMC statistics grew by exactly its connection count on both sides with no fallback.
check_demo() {
    need_setup
    n=${DEMO_CONNECTIONS:-4}
    stats_snap /tmp/demo.s0
    out=$(smcrun demo --json --connections "$n" --bytes 256k 2> /tmp/demo.err)
    rc=$?
    printf '%s\n' "$out" > /tmp/demo.json
    cat /tmp/demo.json /tmp/demo.err
    stats_snap /tmp/demo.s1
    # (a report that is no JSON: vmcheck says so, with serde's message; the exit code after it,
    # as before, so that a report with the reason comes first)
    o=$(vmcheck demo-ran /tmp/demo.json "$n" "$RXE") || fail "$o (smcrun demo exited $rc: $(lastl "$(cat /tmp/demo.err)"))"
    echo "demo: $o"
    [ $rc = 0 ] || fail "smcrun demo exited $rc: $(lastl "$(cat /tmp/demo.err)")"
    # (SMC-R successes of both roles, no SMC-D, no fallback)
    o=$(vmcheck stats-transport /tmp/demo.s0 /tmp/demo.s1 smcr "$n") || fail "demo: $o"
    echo "demo: $o"
    ok
}

# 2. redis: redis-benchmark under smcrun against redis-server under smcrun: every request succeeds and the
#    open connections are SMC-R in sock_diag (smcrun ss), with no fallback in the kernel's counters.
check_redis() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    p=6379
    redis_bg $p
    stats_snap /tmp/redis.s0
    # (-q rewrites its progress line with \r; keep only the final lines)
    out=$(smcrun redis-benchmark -p $p -t set,get -n 2000 -c 10 -q 2>&1)
    rc=$?
    out=$(printf '%s\n' "$out" | tr '\r' '\n' | grep -v 'rps=')
    printf '%s\n' "$out"
    [ $rc = 0 ] || fail "smcrun redis-benchmark exited $rc: $(lastl "$out")"
    printf '%s\n' "$out" | grep -q '^SET: .*requests per second' || fail "redis-benchmark gave no SET result: $(lastl "$out")"
    printf '%s\n' "$out" | grep -q '^GET: .*requests per second' || fail "redis-benchmark gave no GET result: $(lastl "$out")"
    if printf '%s\n' "$out" | grep -qiE 'error|refused|reset'; then fail "redis-benchmark reported: $(printf '%s\n' "$out" | grep -iE 'error|refused|reset' | head -n1)"; fi
    # every request reached the server: 2000 SETs + 2000 GETs (+ the benchmark's CONFIG GETs)
    cmds=$(smcrun redis-cli -p $p info commandstats 2>&1)
    sets=$(printf '%s\n' "$cmds" | sed -n 's/^cmdstat_set:calls=\([0-9]*\),.*/\1/p')
    gets=$(printf '%s\n' "$cmds" | sed -n 's/^cmdstat_get:calls=\([0-9]*\),.*/\1/p')
    [ "${sets:-0}" -ge 2000 ] && [ "${gets:-0}" -ge 2000 ] || fail "redis-server counted ${sets:-0} SET and ${gets:-0} GET calls, expected 2000 each"
    # 10 idle connections held open (-I): sock_diag must show both ends of each as SMC-R
    bg smcrun redis-benchmark -p $p -I -c 10 > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 300 ss-count SMCR 20 --port $p) || fail "smcrun ss --json (10 connections, 20 sockets): $o"
    nsmcr=${o%% *}
    stats_snap /tmp/redis.s1
    # (20 benchmark + 10 idle connections: 30 SMC-R client successes or more, no fallback)
    o=$(vmcheck stats-smc-only /tmp/redis.s0 /tmp/redis.s1 30) || fail "redis: $o"
    echo "redis: SET $sets GET $gets, $nsmcr SMCR sockets; $o"
    ok
}

# fallback_case NAME SERVER-PREFIX CLIENT-PREFIX HOST PORT BIND EXPECT-CLIENT EXPECT-SERVER
#   Runs redis-server (optionally under smcrun) and one idle client connection plus SET/GET (optionally
#   under smcrun) and asserts the fallback reasons sock_diag reports for each SMC side ("-" = that side is
#   a plain TCP program with no SMC socket) and that the data came back intact. An EXPECT is `REASON
#   NAME`, or `REASON/PEER'S NAME/PEER'S` for an end whose peer sent a diagnosis (a decline).
fallback_case() {
    local name srvpre clipre host p bind want_c want_s val r1 r2 o shown
    name=$1 srvpre=$2 clipre=$3 host=$4 p=$5 bind=$6 want_c=$7 want_s=$8
    stats_snap "/tmp/fb.$name.s0"
    [ "$srvpre" = plain ] && srvpre=
    [ "$clipre" = plain ] && clipre=
    bg $srvpre redis-server --port "$p" --bind "$bind" --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait "$p" "$host" "${clipre:-plain}"
    bg $clipre redis-benchmark -h "$host" -p "$p" -I -c 1 > /tmp/idle.log 2>&1
    val="smcrun-$name-$$"
    r1=$($clipre redis-cli -h "$host" -p "$p" set "k$name" "$val" 2>&1)
    r2=$($clipre redis-cli -h "$host" -p "$p" get "k$name" 2>&1)
    [ "$r1" = OK ] && [ "$r2" = "$val" ] || fail "$name: data not intact: SET gave '$(first "$r1")', GET gave '$(first "$r2")'"
    # each SMC end's socket in smc_diag (30 s for it to show), then the kernel's fallback
    # statistics (GET_FBACK_STATS): the same reason counted at least once more
    shown=
    [ "$want_c" = - ] || {
        o=$(vmcheck --wait 300 ss-end "$p" client "TCP $want_c") || fail "$name: $o"
        shown="client $o"
    }
    [ "$want_s" = - ] || {
        o=$(vmcheck --wait 300 ss-end "$p" server "TCP $want_s") || fail "$name: $o"
        shown="$shown${shown:+; }server $o"
    }
    stats_snap "/tmp/fb.$name.s1"
    [ "$want_c" = - ] || o=$(vmcheck stats-reason "/tmp/fb.$name.s0" "/tmp/fb.$name.s1" client "${want_c%%[/ ]*}" 1 --at-least) ||
        fail "$name: smcrun stats --json: $o"
    [ "$want_s" = - ] || o=$(vmcheck stats-reason "/tmp/fb.$name.s0" "/tmp/fb.$name.s1" server "${want_s%%[/ ]*}" 1 --at-least) ||
        fail "$name: smcrun stats --json: $o"
    echo "fallback $name: ok ($shown)"
    cleanup_procs
}

# 4. fallback: the cases where SMC must fall back to TCP keep the data intact and report the right reasons.
check_fallback() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    # a) no UEID: client 0x03030000 (no SMC device), server 0x05000000 (peer declined) / peer 0x03030000
    without_ueid fallback_case no-ueid smcrun smcrun 127.0.0.1 6390 127.0.0.1 '0x03030000 NOSMCDEV' '0x05000000/0x03030000 PEERDECL/NOSMCDEV'
    # b) IPv6 ::1: no SMC-Rv2 over IPv6 here
    fallback_case ipv6 smcrun smcrun ::1 6391 ::1 '0x03030000 NOSMCDEV' '0x05000000/0x03030000 PEERDECL/NOSMCDEV'
    # c) plain TCP server, smcrun client: peer did not indicate SMC
    fallback_case plain-server plain smcrun 127.0.0.1 6392 127.0.0.1 '0x03010000 PEERNOSMC' -
    # d) smcrun server, plain client
    fallback_case plain-client smcrun plain 127.0.0.1 6393 127.0.0.1 - '0x03010000 PEERNOSMC'
    ok
}

# 5. integrity: a few MB each way over SMC-R, checksummed (redis-cli SET from stdin / GET to stdout),
#    and a half-close under a lock the reader needs (sockcheck locked-shutdown), every byte echoed.
check_integrity() {
    need_setup
    need_prog redis-server redis-cli
    p=6379
    mb=${INTEGRITY_MB:-3}
    bytes=$((mb * 1048576))
    bg smcrun redis-server --port $p --save '' --appendonly no --proto-max-bulk-len 64mb --client-query-buffer-limit 64mb > /tmp/redis.log 2>&1
    redis_wait $p
    dd if=/dev/urandom of=/tmp/up bs=1048576 count="$mb" 2> /dev/null
    up=$(sha256sum < /tmp/up | cut -d' ' -f1)
    stats_snap /tmp/int.s0
    t0=$(date +%s)
    r=$(smcrun redis-cli -p $p -x set big < /tmp/up 2>&1)
    [ "$r" = OK ] || fail "upload of $mb MB: redis-cli -x set gave '$(first "$r")'"
    smcrun redis-cli -p $p --raw get big > /tmp/down 2> /tmp/down.err || fail "download: redis-cli get failed: $(first "$(cat /tmp/down.err)")"
    t1=$(date +%s)
    stats_snap /tmp/int.s1
    size=$(wc -c < /tmp/down)
    [ "$size" = $((bytes + 1)) ] || fail "download gave $size bytes, expected $((bytes + 1)) ($bytes + newline)"
    down=$(head -c "$bytes" /tmp/down | sha256sum | cut -d' ' -f1)
    [ "$down" = "$up" ] || fail "sha256 differs: sent $up, got back $down"
    fallback_deltas /tmp/int.s0 /tmp/int.s1
    drx=$(stats_delta /tmp/int.s0 /tmp/int.s1 rx_bytes)
    dtx=$(stats_delta /tmp/int.s0 /tmp/int.s1 tx_bytes)
    echo "integrity: $mb MB each way in $((t1 - t0))s, sha256 $up, SMC rx +$drx tx +$dtx bytes"
    fallbacks_none
    # both ends are in this netns: each byte is counted once sent and once received, both directions
    [ "$drx" -ge $((2 * bytes)) ] && [ "$dtx" -ge $((2 * bytes)) ] ||
        fail "the kernel's SMC byte counters grew by rx $drx tx $dtx, expected >= $((2 * bytes)) each: data did not go over SMC"
    # A half-close under a lock the reader needs (the JDK's shutdownOutput() holds the socket's
    # state lock, which every read takes): the writer fills the connection until it would block
    # (the echo server blocked writing back), then shuts down holding the reader's lock. A shutdown
    # that waited for the send buffer deadlocked there until it gave up after 10 s, and the kernel
    # dropped the tail (the java check under load: 1 run in 6 short). The shim now returns at
    # once and makes the real shutdown in the background when the bytes are out.
    need_prog sockcheck
    bg smcrun sockcheck serve 7013 > /tmp/ls.serve.log 2>&1
    listen_wait 7013
    r=$(SMCRUN_DEBUG=1 smcrun sockcheck locked-shutdown 127.0.0.1:7013 2> /tmp/ls.err) ||
        fail "locked-shutdown failed: $(first "$(cat /tmp/ls.err)")"
    echo "integrity: half-close under the reader's lock: $r"
    total=${r#*echoed=* of }
    total=${total%% *}
    case $r in "echoed=$total of $total intact=true shutdown_ms="*) ;;
        *) fail "half-close under the reader's lock: $r; $(grep -v 'socket fd' /tmp/ls.err | head -n 3 | tr '\n' ' ')" ;; esac
    [ "${r##*unsent_at_shutdown=}" -gt 0 ] || fail "the send buffer was empty at the shutdown, nothing was proven: $r"
    # a bound, not a speed check: returning at once is a millisecond; the old wait was 10 s
    r=${r%% unsent_at_shutdown=*}
    [ "${r##*shutdown_ms=}" -lt 5000 ] || fail "the half-close blocked the writer for ${r##*shutdown_ms=} ms"
    ok
}

# 3. modes: --mode smc (AF_SMC sockets) and --mode inet (IPPROTO_SMC sockets) both run over SMC-R; in inet
#    mode the application sees SO_DOMAIN AF_INET without any masking by the shim.
check_modes() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli sockcheck
    p=6379
    for mode in smc inet; do
        want_fam=43
        [ $mode = inet ] && want_fam=2
        bg smcrun --mode $mode redis-server --port $p --save '' --appendonly no > /tmp/redis.log 2>&1
        redis_wait $p
        bg smcrun --mode $mode redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
        # 2 connections = 2 client + 2 accepted sockets, all SMC-R. In inet mode the clients are IPPROTO_SMC
        # (diag family AF_INET) and the accepted ones PF_SMC (the kernel allocates them so); on 6.12
        # smc_diag leaves the addresses of IPPROTO_SMC sockets zero, so match on state and family only.
        o=$(vmcheck --wait 300 ss-count SMCR 4 --active) || fail "--mode $mode: smcrun ss --json: $o"
        o=$(vmcheck ss-count SMCR 2 --active --family $want_fam) || fail "--mode $mode: the 2 clients' sockets: $o"
        r=$(smcrun --mode $mode redis-cli -p $p set kmode $mode 2>&1)
        [ "$r" = OK ] || fail "--mode $mode: redis-cli set gave '$(first "$r")'"
        cleanup_procs
        # the application's own view, from the workspace's test program (sockcheck identity: a listener,
        # a client and the accepted socket on 127.0.0.1, SO_DOMAIN/SO_PROTOCOL through the shim's
        # getsockopt and through the raw system call, and 4 bytes through the pair)
        stats_snap /tmp/modes.s0
        out=$(smcrun --mode $mode sockcheck identity 2>&1)
        rc=$?
        stats_snap /tmp/modes.s1
        printf 'sockcheck identity under --mode %s: rc=%s\n%s\n' $mode $rc "$out"
        [ $rc = 0 ] || fail "smcrun --mode $mode sockcheck identity exited $rc: $(lastl "$out")"
        kv() { printf '%s\n' "$out" | sed -n "s/^$1=//p" | head -n1; }
        [ "$(kv data_ok)" = true ] || fail "--mode $mode: sockcheck's data did not get through (data_ok=$(kv data_ok))"
        for side in client listener; do
            raw=$(kv ${side}_raw_domain)
            [ "$raw" = "$want_fam" ] || fail "--mode $mode: the kernel made the $side socket with domain '$raw', expected $want_fam"
        done
        if [ $mode = inet ]; then
            # IPPROTO_SMC: the application sees AF_INET because the socket IS AF_INET: no masking
            for side in client listener; do
                [ "$(kv ${side}_domain)" = 2 ] && [ "$(kv ${side}_raw_domain)" = 2 ] ||
                    fail "--mode inet: $side SO_DOMAIN shim $(kv ${side}_domain) raw $(kv ${side}_raw_domain), expected 2 and 2"
                [ "$(kv ${side}_raw_protocol)" = 256 ] ||
                    fail "--mode inet: $side raw SO_PROTOCOL $(kv ${side}_raw_protocol), expected 256 (IPPROTO_SMC)"
            done
            # Kernel fact (6.12 smc_clcsock_accept -> smc_sock_alloc(PF_SMC)): a socket accepted from an
            # IPPROTO_SMC listener is PF_SMC with protocol 256; the shim shows the application AF_INET.
            [ "$(kv accepted_raw_protocol)" = 256 ] && [ "$(kv accepted_domain)" = 2 ] ||
                fail "--mode inet: accepted socket raw protocol $(kv accepted_raw_protocol) (expected 256), SO_DOMAIN via shim $(kv accepted_domain) (expected 2)"
        else
            for side in client accepted listener; do
                [ "$(kv ${side}_domain)" = 2 ] ||
                    fail "--mode smc: $side SO_DOMAIN through the shim is $(kv ${side}_domain), expected 2 (AF_SMC masked as AF_INET)"
            done
        fi
        dc=$(stats_delta /tmp/modes.s0 /tmp/modes.s1 clnt_succ)
        fallback_deltas /tmp/modes.s0 /tmp/modes.s1
        [ "$dc" = 1 ] && [ "$dfc" = 0 ] && [ "$dfs" = 0 ] ||
            fail "--mode $mode: sockcheck's connection: SMC-R client successes +$dc, fallbacks client +$dfc server +$dfs (expected +1, 0, 0)"
        echo "modes: --mode $mode ok (sockets of family $want_fam, SMC-R)"
    done
    ok
}

# 6. fixtures: the kernel's raw netlink replies, captured by `smcrun __capture` after SMC-R traffic (with
#    connections open) and after fallbacks, sent to the host (tests/vm/run --capture-fixtures keeps them).
capture_phase() {
    local dir _o rc n empty
    dir=/tmp/fx/$1
    mkdir -p "$dir"
    _o=$(smcrun __capture "$dir" 2>&1)
    rc=$?
    printf '__capture %s: rc=%s %s\n' "$1" $rc "$_o"
    [ $rc = 0 ] || fail "smcrun __capture ($1) exited $rc: $(lastl "$_o")"
    n=$(find "$dir" -name '*.bin' | wc -l)
    [ "$n" -gt 0 ] || fail "smcrun __capture ($1) wrote no .bin files"
    empty=$(find "$dir" -name '*.bin' -size 0 | head -n1)
    [ -z "$empty" ] || fail "smcrun __capture ($1) wrote an empty file: $(basename "$empty")"
}
# The replies the issue asks for; missing ones are collected in $FX_MISSING (the files still go out).
FX_WANT="smc_GET_SYS_INFO smc_GET_STATS smc_GET_FBACK_STATS smc_GET_LGR_SMCR smc_GET_LINK_SMCR smc_GET_DEV_SMCR
 smc_DUMP_UEID sock_diag_ext0 sock_diag_ext1 sock_diag_ext2 sock_diag_ext8
 rdma_RES_GET rdma_RES_QP_GET rdma_RES_CQ_GET rdma_RES_MR_GET rdma_RES_PD_GET"
FX_MISSING=
fx_expect() { # fx_expect PHASE [NAME:MIN-BYTES...]: every FX_WANT file present, the named ones bigger
    local w f
    for w in $FX_WANT; do
        [ -s "/tmp/fx/$1/$w.bin" ] || FX_MISSING="$FX_MISSING $1/$w"
    done
    shift
    for w in "$@"; do
        f=/tmp/fx/$PHASE_DIR/${w%%:*}.bin
        [ -e "$f" ] && [ "$(wc -c < "$f")" -le "${w##*:}" ] && FX_MISSING="$FX_MISSING $PHASE_DIR/${w%%:*}(only $(wc -c < "$f") bytes: no entries)"
    done
    return 0
}
fx_what() { # what request a capture file answers
    case ${1%.bin} in
    smc_pnetid_*) echo "SMC_PNETID generic netlink ${1#smc_pnetid_} (dump)" ;;
    smc_*) echo "SMC_GEN_NETLINK ${1#smc_} (NLM_F_DUMP)" ;;
    sock_diag_ext*) n=${1#sock_diag_ext}; echo "SOCK_DIAG_BY_FAMILY AF_SMC dump, diag_ext=${n%.bin}" ;;
    rdma_*) echo "RDMA netlink (NLDEV) ${1#rdma_} dump" ;;
    *) echo "see smcrun __capture" ;;
    esac | sed 's/\.bin//'
}
# fx_list PHASE: the README's list of a phase's captures, each with its size and the request it answers
fx_list() {
    local f
    for f in $(cd "/tmp/fx/$1" && ls); do echo "- \`$f\` ($(wc -c < "/tmp/fx/$1/$f") bytes): $(fx_what "$f")"; done
}
# fx_send CHECK: every file under /tmp/fx (the phases and their READMEs) to the host, said in a line
#   of CHECK's; then a wanted capture that is missing ($FX_MISSING) fails the check: the files go out
#   first, so that the host still keeps what was captured.
fx_send() {
    local f
    for f in $(cd /tmp/fx && find . -type f | sed 's|^\./||' | sort); do
        send_file "fixtures/$f" "/tmp/fx/$f"
    done
    echo "$1: $(find /tmp/fx -name '*.bin' | wc -l) files sent"
    [ -z "$FX_MISSING" ] || fail "smcrun __capture did not capture:$FX_MISSING"
}
# fx_scenario MODE OK FB "OK-EXPECT" "FB-EXPECT": the fixtures' scenario. redis-server and 2 idle
#   redis-benchmark connections under smcrun, open over MODE (SMCR or SMCD): `smcrun __capture` into
#   phase OK; then without the UEID one idle smcrun client and one plain one, fallen back: phase FB.
#   OK-EXPECT and FB-EXPECT: fx_expect's NAME:MIN-BYTES lists (20 bytes = NLMSG_DONE alone: with
#   connections open those dumps must have entries).
fx_scenario() {
    local p o r1
    p=6379
    redis_bg $p
    smcrun redis-benchmark -p $p -t set,get -n 200 -c 2 -q > /dev/null 2>&1 || fail "redis-benchmark failed before the capture"
    bg smcrun redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 300 ss-count "$1" 4) || fail "no open $1 connections to capture$(ueid_hint "SMC-Rv2 and, on x86, SMC-Dv2 need one"): $o"
    capture_phase "$2"
    PHASE_DIR=$2 fx_expect "$2" $4
    cleanup_procs
    ueid_drop
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c 1 > /tmp/idle.log 2>&1
    bg redis-benchmark -p $p -I -c 1 > /tmp/idle2.log 2>&1
    o=$(vmcheck --wait 300 ss-count TCP 3 --all)
    r1=$?
    capture_phase "$3"
    PHASE_DIR=$3 fx_expect "$3" $5
    ueid_restore
    [ $r1 = 0 ] || fail "the fallback connections did not show up in smcrun ss -a --json: $o"
    cleanup_procs
}
check_fixtures() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    # fallbacks: no UEID (client NOSMCDEV, server PEERDECL) and a plain client (PEERNOSMC)
    fx_scenario SMCR smcr fallback "smc_GET_LGR_SMCR:20 smc_GET_LINK_SMCR:20 sock_diag_ext0:20 smc_DUMP_UEID:20" \
        "smc_GET_FBACK_STATS:20 sock_diag_ext0:20"
    {
        echo "# Kernel netlink replies captured in the VM test bed"
        echo
        echo "Raw bytes of real kernel replies (netlink messages as received, several datagrams concatenated"
        echo "as \`smcrun __capture\` writes them), for the kernel crate's parsers' tests. Re-capture with"
        echo "\`tests/vm/run --capture-fixtures\` (boots the VM and replaces these files)."
        echo
        echo "SMC-D captures (the project's SMC-D kernel, \`tests/vm/run --kernel smcd --capture-fixtures\`) are in"
        echo "smcd/ and smcd-fallback/, described in [smcd/README.md](smcd/README.md)."
        echo
        echo "- Kernel: Debian \`linux-image-$(uname -r)\` ($(uname -v)), qemu TCG, 2 vCPUs."
        echo "- Set-up: \`smcrun setup soft-roce --netdev lo --name rxe_lo\`, \`smcrun ueid add SMCRUN-TEST\` (SMC-Rv2 on 127.0.0.1)."
        echo "- smcrun: $(smcrun --version 2>&1 | head -n1), commit $SRC_REV."
        echo
        echo "## smcr/"
        echo
        echo "After \`smcrun redis-server --port 6379\` served \`smcrun redis-benchmark -t set,get -n 200 -c 2\`, with"
        echo "\`smcrun redis-benchmark -I -c 2\` holding 2 SMC-R connections open (4 active SMC-R sockets; listeners on 0.0.0.0 and [::]):"
        echo "\`smcrun __capture smcr\`."
        echo
        fx_list smcr
        echo
        echo "## fallback/"
        echo
        echo "After the above, then \`smcrun ueid del SMCRUN-TEST\` (no UEID: no SMC-Rv2), a new"
        echo "\`smcrun redis-server --port 6379\` with one idle \`smcrun redis-benchmark -I -c 1\` connection (client"
        echo "fallback 0x03030000 NOSMCDEV, server 0x05000000 PEERDECL / peer 0x03030000) and one plain"
        echo "\`redis-benchmark -I -c 1\` connection (server fallback 0x03010000 PEERNOSMC), all open:"
        echo "(smcrun in its default auto mode: the sockets are IPPROTO_SMC, accepted ones PF_SMC; smc_diag"
        echo "leaves the addresses of IPPROTO_SMC-created sockets zero on this kernel, ports are right)."
        echo "\`smcrun __capture fallback\`. The statistics also still hold the SMC-R traffic of smcr/."
        echo
        fx_list fallback
    } > /tmp/fx/README.md
    fx_send fixtures
    ok
}

# 7. two-vms: redis-server under smcrun in vm1 (10.5.0.1, server), redis-benchmark + redis-cli under smcrun
#    in vm2 (10.5.0.2, client), over SMC-R between the guests (soft-RoCE on eth0, joined by a qemu socket).
check_two_vms() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    p=6379
    if [ "$role" = server ]; then
        bg smcrun redis-server --port $p --bind 10.5.0.1 --protected-mode no --save '' --appendonly no > /tmp/redis.log 2>&1
        # (a PING from this guest to its own 10.5.0.1 falls back: count from after it)
        redis_wait $p 10.5.0.1
        stats_snap /tmp/tv.s0
        # serve until the client sends SHUTDOWN; meanwhile look for the client's connections in sock_diag
        seen=0
        end=$(($(date +%s) + ${TWO_VM_WAIT:-110}))
        while [ "$(date +%s)" -lt $end ] && pidof redis-server > /dev/null; do
            # (IPPROTO_SMC sockets have zero addresses in smc_diag on 6.12: match the port)
            n=$(vmcheck ss-count SMCR 1 --active --port $p)
            n=${n%% *}
            [ "$n" -gt "$seen" ] 2> /dev/null && seen=$n
            sleep 0.2
        done
        pidof redis-server > /dev/null && fail "the client never shut the server down (${TWO_VM_WAIT:-110}s); sock_diag showed up to $seen SMCR sockets from 10.5.0.2"
        stats_snap /tmp/tv.s1
        vmcheck stats-growth /tmp/tv.s0 /tmp/tv.s1
        ds=$(stats_delta /tmp/tv.s0 /tmp/tv.s1 srv_succ)
        dfs=$(stats_delta /tmp/tv.s0 /tmp/tv.s1 srv_fback)
        echo "two-vms server: up to $seen SMCR sockets from 10.5.0.2 seen, server succ +$ds fallback +$dfs"
        [ "$seen" -ge 2 ] || fail "sock_diag never showed 2 active SMCR sockets on port $p (max $seen)"
        [ "$dfs" = 0 ] || fail "server fallback counter grew by $dfs"
        [ "$ds" -ge 2 ] || fail "server SMC-R successes grew by $ds"
        ok
    fi
    # client
    i=0
    until [ "$(smcrun redis-cli -h 10.5.0.1 -p $p ping 2>/dev/null)" = PONG ]; do
        i=$((i + 1))
        [ $i -lt 150 ] || fail "the server 10.5.0.1:$p did not answer PING within 60s"
        sleep 0.4
    done
    stats_snap /tmp/tv.s0
    out=$(smcrun redis-benchmark -h 10.5.0.1 -p $p -t set,get -n 100 -c 2 -q 2>&1)
    rc=$?
    out=$(printf '%s\n' "$out" | tr '\r' '\n' | grep -v 'rps=')
    printf '%s\n' "$out"
    bg smcrun redis-benchmark -h 10.5.0.1 -p $p -I -c 2 > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 300 ss-count SMCR 2 --active --port $p)
    r1=$?
    dd if=/dev/urandom of=/tmp/up bs=1024 count=512 2> /dev/null
    r=$(smcrun redis-cli -h 10.5.0.1 -p $p -x set big < /tmp/up 2>&1)
    smcrun redis-cli -h 10.5.0.1 -p $p --raw get big 2> /dev/null | head -c 524288 > /tmp/down
    sleep 1 # let the server's poll see the idle connections
    # always end the server (it waits for this), then judge
    smcrun redis-cli -h 10.5.0.1 -p $p shutdown nosave > /dev/null 2>&1
    stats_snap /tmp/tv.s1
    [ $rc = 0 ] && printf '%s\n' "$out" | grep -q '^GET: .*requests per second' ||
        fail "redis-benchmark over 10.5.0.1 failed (rc $rc): $(lastl "$out")"
    [ $r1 = 0 ] || fail "sock_diag shows no 2 active SMCR connections to port $p: $o"
    [ "$r" = OK ] || fail "SET of 512 KiB gave '$(first "$r")'"
    [ "$(sha256sum < /tmp/up)" = "$(sha256sum < /tmp/down)" ] || fail "512 KiB came back different"
    dc=$(stats_delta /tmp/tv.s0 /tmp/tv.s1 clnt_succ)
    dfc=$(stats_delta /tmp/tv.s0 /tmp/tv.s1 clnt_fback)
    echo "two-vms client: client succ +$dc fallback +$dfc"
    [ "$dfc" = 0 ] || fail "client fallback counter grew by $dfc"
    [ "$dc" -ge 4 ] || fail "client SMC-R successes grew by $dc, expected >= 4"
    ok
}

# 8. views: after known traffic the operator's views show its numbers. `smcrun demo` with N connections of B
#    bytes each way: stats --json (new layout keys too) grew by N SMC-R successes per side and >= 2*N*B bytes
#    each way; with K idle redis connections open: ss --json has 2K ACTIVE SMCR sockets, -p names redis-server
#    and redis-benchmark as their owners, linkgroup --json counts as many connections as ss shows SMC-R
#    sockets, rdma --json lists one RTS QP owned by "smc" per SMC-R link and a qp used count equal to its QPs;
#    a plain client's fallback shows up decoded in stats -d --json; monitor base -i 1 --count 3 --json shows
#    non-zero rates while redis-benchmark runs, and stats --interval shows that traffic as a delta.
check_views() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    n=3 b=262144 k=3 p=6380
    stats_snap /tmp/views.s0
    out=$(smcrun demo --json --connections $n --bytes $b 2> /tmp/views.demo.err)
    rc=$?
    printf '%s\n' "$out" > /tmp/views.demo
    [ $rc = 0 ] || fail "smcrun demo --connections $n failed (rc $rc): $(lastl "$(cat /tmp/views.demo.err)")"
    o=$(vmcheck demo-intact /tmp/views.demo) || fail "$o"
    stats_snap /tmp/views.s1
    # the summary figures of the new layout, before and after
    o=$(vmcheck stats-layout /tmp/views.s0 /tmp/views.s1 $((2 * n)) $((2 * n * b))) ||
        fail "$o ($n connections echoing $b B, both ends)"
    echo "views: demo $n x $b B: $o"
    smcrun stats -m smcr | head -n 12

    # K idle connections held open
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c $k > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 300 ss-count SMCR $((2 * k)) --active --port $p) || fail "smcrun ss --json: $o"
    # -p: the owners, from /proc/*/fd
    o=$(vmcheck ss-owners $p redis-server redis-benchmark $k) || fail "$o"
    echo "views: ss -p: $o"
    smcrun ss -p | grep ":$p" | head -n 2
    # linkgroup: its connection counts are the SMC-R sockets with a connection (the same moment: retry)
    i=0
    while :; do
        smcrun linkgroup --json > /tmp/views.lg 2> /tmp/views.lg.err || fail "smcrun linkgroup --json failed: $(first "$(cat /tmp/views.lg.err)")"
        o=$(vmcheck linkgroup-ss /tmp/views.lg) && break
        i=$((i + 1))
        [ $i -lt 10 ] || fail "$o"
        sleep 0.5
    done
    echo "views: linkgroup: $o"
    o=$(vmcheck linkgroup-both-ends /tmp/views.lg SMCRUN-TEST) || fail "$o"
    echo "views: linkgroup: $o"
    smcrun linkgroup
    smcrun link | head -n 3
    smcrun device
    # link, device and info agree with linkgroup and the set-up (rxe on lo, the UEID)
    nl=$(vmcheck link-active /tmp/views.lg "$RXE" lo) || fail "$nl"
    dl=$(vmcheck device-active "$RXE" --netdev lo --links) || fail "$dl"
    o=$(vmcheck info-smcr-v2 SMCRUN-TEST) || fail "$o"
    echo "views: link: $nl; device: $dl; info: $o"
    # rdma: one RTS RC QP of "smc" per link, and the summary's used count is the QPs it lists; the
    # maximums, from the device's verbs interface (ib_uverbs is loaded in the guest)
    o=$(vmcheck rdma-links /tmp/views.lg "$RXE") || fail "$o"
    echo "views: rdma: $o"
    smcrun rdma
    smcrun rdma "$RXE" qp
    # a plain client falls back (server 0x03010000 PEERNOSMC), decoded in stats -d --json
    stats_snap /tmp/views.s2
    redis-cli -p $p ping > /dev/null 2>&1
    stats_snap /tmp/views.s3
    o=$(vmcheck stats-reason /tmp/views.s2 /tmp/views.s3 server 0x03010000 1 --name PEERNOSMC) ||
        fail "after one plain client: $o"
    smcrun stats -d | tail -n 8

    # traffic: monitor and stats --interval while redis-benchmark runs
    bg smcrun redis-benchmark -p $p -t set -d 4096 -n 10000000 -c 2 -q > /dev/null 2>&1
    sleep 1
    smcrun monitor base -i 1 --count 3 --json > /tmp/views.mon 2> /tmp/views.mon.err || fail "smcrun monitor base --json failed: $(first "$(cat /tmp/views.mon.err)")"
    cat /tmp/views.mon
    o=$(vmcheck monitor-busy /tmp/views.mon 3 --conns 2) || fail "$o (redis-benchmark running)"
    smcrun monitor base -m smcr -i 1 --count 2
    smcrun stats --interval 1 --json > /tmp/views.iv || fail "smcrun stats --interval 1 --json failed"
    o=$(vmcheck stats-interval /tmp/views.iv 1) || fail "$o"
    echo "views: stats --interval 1: $o"
    ok
}

# ------------------------------------------------------------------ per-process telemetry (sidecar)
# sidecar: redis-server and redis-benchmark -c 20 both under smcrun: `smcrun ps` shows each with 20 SMC-R
#   connections; a plain-TCP server shows as TCP with 0x03010000 decoded in `smcrun why`; and the exit report
#   of a redis-benchmark run matches the kernel's counters for the same run.
check_sidecar() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    p=6390
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c 20 > /tmp/idle.log 2>&1
    e=$(vmcheck --wait 100 ps-running redis-benchmark --smcr 20) ||
        fail "smcrun ps: redis-benchmark does not show 20 SMC-R connections: $(first "$e")"
    echo "ps redis-benchmark: pid $e"
    # the server also has the redis-cli PINGs of redis_wait (SMC-R too): at least 20
    spid=$(vmcheck --wait 100 ps-running redis-server --smcr 20 --no-tcp) ||
        fail "smcrun ps: redis-server does not show >= 20 SMC-R and no TCP connections: $(first "$spid")"
    echo "ps redis-server: pid $spid"
    why=$(smcrun why "$spid" 2>&1) || fail "smcrun why $spid failed: $(first "$why")"
    printf '%s\n' "$why" | grep -q '^server .* SMC-R ' || fail "smcrun why $spid lists no SMC-R server connection: $(first "$why")"
    cleanup_procs

    # exit report vs the kernel's counters: one run of redis-benchmark, 10 connections
    redis_bg $p
    stats_snap /tmp/sc.s0
    out=$(SMCRUN_REPORT=1 smcrun redis-benchmark -p $p -t set -n 2000 -c 10 -q 2>&1)
    stats_snap /tmp/sc.s1
    line=$(printf '%s\n' "$out" | tr '\r' '\n' | grep '^smcrun: pid [0-9]* redis-benchmark: ')
    echo "exit report: $line"
    [ -n "$line" ] || fail "no exit report from SMCRUN_REPORT=1 redis-benchmark: $(lastl "$out")"
    dc=$(stats_delta /tmp/sc.s0 /tmp/sc.s1 clnt_succ)
    set -- "$(printf '%s\n' "$line" | sed -n 's/.*: \([0-9]*\) connections*, .*/\1/p')" \
        "$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) SMC-R.*/\1/p')" \
        "$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) TCP.*/\1/p')"
    # every connection the kernel saw is counted; the 10 benchmark connections (open for the whole run)
    # are classified SMC-R; a short-lived one (the benchmark's CONFIG GET) may close before the sidecar
    # looks and is then counted by the close hook as "SMC (mode not seen)", never guessed
    [ "$1" = "$dc" ] && [ "${2:-0}" -ge 10 ] && [ "$3" = 0 ] ||
        fail "exit report says $1 connections, $2 SMC-R, $3 TCP; the kernel counted $dc client SMC-R successes: $line"
    cleanup_procs

    # a plain TCP server: the smcrun client falls back with 0x03010000, and says so
    bg redis-server --port $p --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait $p 127.0.0.1 plain
    bg smcrun redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
    bpid=$(vmcheck --wait 100 ps-running redis-benchmark --tcp 2) ||
        fail "smcrun ps: redis-benchmark against a plain server does not show 2 TCP connections: $(first "$bpid")"
    why=$(smcrun why "$bpid" 2>&1)
    echo "$why" | head -n 8
    printf '%s\n' "$why" | grep -q '^client .* TCP .*0x03010000' ||
        fail "smcrun why $bpid does not show a TCP client connection with 0x03010000: $(first "$why")"
    e=$(vmcheck ps-running redis-benchmark --tcp 2 --top-reason 0x03010000) ||
        fail "top reason is not 0x03010000: $(first "$e")"
    ok
}

# ------------------------------------------------------------------ policy
# sc_run LOG ARGS...: run sockcheck under smcrun with an exit report; output and report in LOG. (The
# clients hold their connection 1.5 s: the sidecar classifies within a second of a connection, and one
# closed before that is reported as not classified.)
sc_run() {
    local log pid i
    log=$1
    shift
    SMCRUN_REPORT=1 smcrun "$@" > "$log" 2>&1 &
    pid=$!
    i=0
    while kill -0 $pid 2> /dev/null; do
        i=$((i + 1))
        if [ $i -gt 300 ]; then
            # stuck: show where, while it is still alive
            echo "sc_run $* still running after 60s; its threads, then the check's background processes':"
            for q in $pid $(cat /tmp/check.pids 2> /dev/null); do
                for t in /proc/"$q"/task/*; do
                    echo "-- $t $(cat "$t/comm") wchan=$(cat "$t/wchan" 2> /dev/null)"
                    head -n 8 "$t/stack" 2> /dev/null
                done
            done
            netstat -tan 2> /dev/null | grep -E '638[0-9]' | head -n 20
            cat "$log"
            smcrun ss -a
            kill -9 $pid
            fail "$* did not finish within 60s: $(lastl "$(cat "$log")")"
        fi
        sleep 0.2
    done
    wait $pid || fail "$* exited $?: $(lastl "$(cat "$log")")"
}
# report_of LOG: the exit report's "N connections, ..." part
report_of() {
    grep '^smcrun: pid [0-9]* sockcheck: ' "$1" | sed 's/^smcrun: pid [0-9]* sockcheck: //'
}

# policy: with --policy 'smc port 6379; tcp' a client connecting to 6379 runs SMC-R and one connecting to
#   6380 (an SMC-capable server too) runs TCP by policy with its data intact; a server rule turns a
#   listener to TCP; an fd registered in epoll before a nonblocking connect still gets EPOLLOUT and data;
#   options set before connect are still set after; redis with a policy for its port only runs SMC-R.
check_policy() {
    need_setup
    need_prog sockcheck redis-server redis-benchmark
    pol='smc port 6379; tcp'
    echo "t=$(date +%s) start"
    bg smcrun sockcheck serve 6379 > /tmp/s6379.log 2>&1
    bg smcrun sockcheck serve 6380 > /tmp/s6380.log 2>&1
    sleep 1
    for port in 6379 6380; do
        stats_snap /tmp/pol.s0
        sc_run /tmp/pol.$port smcrun --policy "$pol" sockcheck client 127.0.0.1:$port 100000 1500
        stats_snap /tmp/pol.s1
        cat /tmp/pol.$port
        grep -q '^echo_ok=true' /tmp/pol.$port || fail "client to $port under '$pol': data not intact: $(first "$(cat /tmp/pol.$port)")"
        r=$(report_of /tmp/pol.$port)
        dc=$(stats_delta /tmp/pol.s0 /tmp/pol.s1 clnt_succ)
        dfc=$(stats_delta /tmp/pol.s0 /tmp/pol.s1 clnt_fback)
        echo "port $port: report '$r', kernel client succ +$dc fallback +$dfc"
        if [ $port = 6379 ]; then
            case $r in "1 connection, 1 SMC-R, 0 TCP"*) ;; *) fail "client to 6379 is not SMC-R: $r" ;; esac
            [ "$dc" = 1 ] || fail "kernel SMC-R client successes grew by $dc for the 6379 connection, expected 1"
        else
            case $r in "1 connection, 0 SMC-R, 1 TCP (TCP by policy: 1)"*) ;; *) fail "client to 6380 is not TCP by policy: $r" ;; esac
            [ "$dc" = 0 ] || fail "the TCP-by-policy connection to 6380 still counted as an SMC-R success"
        fi
    done
    echo "t=$(date +%s) clients done"
    # epoll before a nonblocking connect, and options before connect, on both paths
    for port in 6379 6380; do
        smcrun --policy "$pol" sockcheck epoll-connect 127.0.0.1:$port > /tmp/ep.$port 2>&1
        cat /tmp/ep.$port
        grep -q '^epoll_n=1 epollout=true' /tmp/ep.$port || fail "epoll-registered nonblocking connect to $port got no EPOLLOUT: $(first "$(cat /tmp/ep.$port)")"
        grep -q '^so_error=0' /tmp/ep.$port && grep -q '^echo_ok=true' /tmp/ep.$port ||
            fail "epoll-registered nonblocking connect to $port: $(tr '\n' ' ' < /tmp/ep.$port)"
        smcrun --policy "$pol" sockcheck opts-connect 127.0.0.1:$port > /tmp/op.$port 2>&1
        cat /tmp/op.$port
        for kv in connect=0 nodelay=1 keepalive=1 rcvbuf_kept=true reuseaddr=1 tos=16 echo_ok=true; do
            grep -qx "$kv" /tmp/op.$port || fail "options before connect to $port: want $kv, got: $(tr '\n' ' ' < /tmp/op.$port)"
        done
    done
    echo "t=$(date +%s) epoll and options done"
    cleanup_procs
    echo "t=$(date +%s) cleaned up"
    # a server rule: the listener on 6381 is turned to TCP, so an SMC client falls back (peer no SMC)
    bg smcrun -d --policy 'tcp role server port 6381; smc' sockcheck serve 6381 > /tmp/s6381.log 2>&1
    sleep 1
    cat /tmp/s6381.log
    sc_run /tmp/pol.6381 smcrun sockcheck client 127.0.0.1:6381 100000 1500
    cat /tmp/pol.6381
    grep -q '^echo_ok=true' /tmp/pol.6381 || fail "client of the TCP-by-policy server: data not intact"
    r=$(report_of /tmp/pol.6381)
    case $r in *"1 TCP (0x03010000 "*) ;; *) fail "client of a server turned to TCP by policy: expected TCP with 0x03010000, got: $r" ;; esac
    cleanup_procs
    echo "t=$(date +%s) server rule done"
    # redis with a policy that accelerates only the Redis port: every connection SMC-R
    bg smcrun --policy "$pol" redis-server --port 6379 --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait 6379
    stats_snap /tmp/pr.s0
    out=$(SMCRUN_REPORT=1 smcrun --policy "$pol" redis-benchmark -p 6379 -t set,get -n 2000 -c 10 -q 2>&1)
    stats_snap /tmp/pr.s1
    printf '%s\n' "$out" | tr '\r' '\n' | grep -v 'rps='
    printf '%s\n' "$out" | tr '\r' '\n' | grep -q '^GET: .*requests per second' || fail "redis-benchmark under the policy gave no GET result"
    line=$(printf '%s\n' "$out" | tr '\r' '\n' | grep '^smcrun: pid [0-9]* redis-benchmark: ')
    case $line in *" 0 TCP"*) ;; *) fail "redis-benchmark under '$pol' had TCP connections: $line" ;; esac
    dfc=$(stats_delta /tmp/pr.s0 /tmp/pr.s1 clnt_fback)
    [ "$dfc" = 0 ] || fail "kernel fallback counters grew by $dfc under the policy"
    ok
}

# Each area's checks live in a file of their own beside this one (checks-AREA.sh).
for f in /vm/checks-*.sh; do
    # shellcheck disable=SC1090
    [ -e "$f" ] && . "$f"
done

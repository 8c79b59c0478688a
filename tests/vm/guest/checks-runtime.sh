# shellcheck shell=dash
# Per-process truth over real SMC-R (sourced by checks.sh): pre-fork workers, a server that drops root,
# short connections counted exactly, and sysctls set by the launcher. vmcheck (tests/vm/check) asks
# `smcrun ps --json` and the saved `smcrun stats --json` snapshots.
#
# shellcheck disable=SC2015,SC2086,SC2154

# runtime-prefork: a pre-fork server (the parent listens, 4 forked workers accept on the inherited
#   listener) and 20 client connections, both under smcrun: root's `smcrun ps` lists every worker with
#   the connections it accepted, all SMC-R; the kernel's SMC-R server successes grew by 20.
check_runtime_prefork() {
    need_setup
    need_prog shapes
    stats_snap /tmp/pf.s0
    SMCRUN_REPORT=1 smcrun shapes prefork 7100 4 5 > /tmp/pf.out 2> /tmp/pf.err &
    echo $! >> /tmp/check.pids
    i=0
    while ! grep -q '^ready=1' /tmp/pf.out && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    grep -q '^ready=1' /tmp/pf.out || fail "the pre-fork server did not start: $(first "$(cat /tmp/pf.err)")"
    kids=$(sed -n 's/^child=//p' /tmp/pf.out | tr '\n' ' ')
    echo "workers: $kids"
    # each connection held 400 ms, so both sides are classified while open
    out=$(smcrun shapes hammer 127.0.0.1:7100 20 4 400 2>&1)
    echo "clients: $out"
    [ "$out" = "made=20 failed=0" ] || fail "clients of the pre-fork server: $(first "$out")"
    set -- $kids
    [ $# = 4 ] || fail "the pre-fork server started $# workers, expected 4"
    list=$(vmcheck --wait 200 ps-smcr-only --total 20 $kids) ||
        fail "root's smcrun ps does not show the 4 workers with 20 SMC-R connections, each SMC-R only: $list"
    echo "$list"
    i=0
    while ! grep -q '^done=1' /tmp/pf.out && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    stats_snap /tmp/pf.s1
    line=$(vmcheck stats-side /tmp/pf.s0 /tmp/pf.s1 server 20) || fail "$line"
    echo "$line"
    ok
}

# runtime-dropuid: a server that listens as root and switches to uid 65534 (setresuid), 3 connections:
#   root's `smcrun ps` lists it under uid 65534 with its 3 SMC-R connections, and `smcrun why` works.
check_runtime_dropuid() {
    need_setup
    need_prog shapes
    bg smcrun shapes drop-root 7101 65534 3 > /tmp/du.out 2>&1
    i=0
    while ! grep -q '^listening=' /tmp/du.out && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    grep -q '^setuid=0 uid=65534' /tmp/du.out || fail "drop-root did not switch uid: $(tr '\n' ' ' < /tmp/du.out)"
    out=$(smcrun shapes hammer 127.0.0.1:7101 3 1 400 2>&1)
    [ "$out" = "made=3 failed=0" ] || fail "clients of the uid-switching server: $(first "$out")"
    pid=$(vmcheck --wait 200 ps-uid 65534 3) ||
        fail "root's smcrun ps does not list the uid-65534 server with 3 SMC-R connections: $pid"
    echo "the uid-65534 server: pid $pid, 3 SMC-R connections"
    why=$(smcrun why "$pid" 2>&1) || fail "smcrun why $pid (the uid-switched server) failed: $(first "$why")"
    echo "$why" | head -n 6
    [ "$(printf '%s\n' "$why" | grep -c '^server .* SMC-R ')" = 3 ] || fail "smcrun why $pid does not list 3 SMC-R server connections"
    ok
}

# runtime-ns: a single-threaded program under smcrun (ns-enter drain) enters its mount namespace
#   again (setns) and a new user namespace (unshare) after SMC-R connections and a shutdown handed
#   to the runtime's drainer: the kernel grants both calls only to a process with one thread, and
#   the runtime stops its sidecar and its drainer around them, so both succeed as without smcrun
#   (a vfork child's unshare before them leaves the parent's threads alone);
#   every byte of the drained connection arrives and all 5 connections (10 ends) are counted, none
#   TCP. Then a program whose main thread leaves with pthread_exit, its worker's shutdown handed
#   to the drainer (main-exits 3 drain), ends with its last thread.
check_runtime_ns() {
    need_setup
    need_prog ns-enter
    out=$(SMCRUN_REPORT=1 smcrun ns-enter drain 2>&1) || fail "smcrun ns-enter drain failed: $(lastl "$out")"
    printf '%s\n' "$out" | grep -E '^(threads|setns|unshare|drained|smcrun: pid)'
    [ "$(printf '%s\n' "$out" | grep '^threads ' | tr '\n' ' ')" = "threads 3 threads 2 " ] ||
        fail "threads before and after the calls (sidecar and drainer, then the sidecar alone): $(printf '%s\n' "$out" | grep '^threads ' | tr '\n' ' ')"
    printf '%s\n' "$out" | grep -qx 'vfork-unshare-user 0' || fail "a vfork child's unshare of a user namespace: $(printf '%s\n' "$out" | grep '^vfork')"
    printf '%s\n' "$out" | grep -qx 'after-vfork threads 3' || fail "the runtime's threads after a vfork child's unshare: $(printf '%s\n' "$out" | grep '^after-vfork')"
    printf '%s\n' "$out" | grep -qx 'setns-mnt 0' || fail "setns into the mount namespace under smcrun: $(printf '%s\n' "$out" | grep '^setns')"
    printf '%s\n' "$out" | grep -qx 'unshare-user 0' || fail "unshare of a user namespace under smcrun: $(printf '%s\n' "$out" | grep '^unshare')"
    d=$(printf '%s\n' "$out" | grep '^drained ') || fail "no drained line: $(lastl "$out")"
    set -- $d
    [ "$2" = "$4" ] && [ "$2" -gt 0 ] || fail "the drained connection lost bytes: $d"
    pid=$(printf '%s\n' "$out" | sed -n 's/^done pid=//p')
    sum=$(printf '%s\n' "$out" | grep "^smcrun: pid $pid " | head -n1)
    # (short connections may end before the sidecar sees their mode: "SMC (mode not seen)")
    case "$sum" in
    *": 10 connections, "*) ;;
    *) fail "the exit summary does not count 10 connection ends: $sum" ;;
    esac
    ! printf '%s\n' "$sum" | grep -qE ' [1-9][0-9]* TCP' || fail "connection ends fell back to TCP: $sum"
    # A program whose main thread leaves with pthread_exit ends with its last thread, also when
    # the drainer runs (idle, it never ends by itself): killed after 20 s otherwise (137).
    SMCRUN_DEBUG=2 smcrun main-exits 3 drain > /tmp/me.out 2>&1 &
    mpid=$!
    (sleep 20; kill -9 "$mpid" 2> /dev/null) &
    wpid=$!
    rc=0
    wait "$mpid" || rc=$?
    kill "$wpid" 2> /dev/null
    grep -E '^(made|drained|exit handler)|unsent' /tmp/me.out
    [ "$rc" = 0 ] || fail "main-exits 3 drain (its main thread left, the drainer ran): exit status $rc (137: did not end within 20 s)"
    grep -q 'unsent: made when they are out' /tmp/me.out || fail "main-exits 3 drain: the drainer did not take the shutdown: $(tr '\n' ' ' < /tmp/me.out | cut -c1-200)"
    grep -q '^made 3 pid=' /tmp/me.out || fail "main-exits 3 drain: the worker's line is not out"
    ok
}

# runtime-short: 500 short connections (connect, a byte each way, close at once) from 8 threads, both
#   sides under smcrun: both exit reports count exactly 500 connections, none TCP; how many were
#   classified SMC-R while open and how many only "SMC (mode not seen)" at close is printed.
check_runtime_short() {
    need_setup
    need_prog shapes
    SMCRUN_REPORT=1 smcrun shapes serve-n 7102 500 > /tmp/sh.srv 2>&1 &
    spid=$!
    echo $spid >> /tmp/check.pids
    i=0
    while ! grep -q '^listening=' /tmp/sh.srv && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    stats_snap /tmp/sh.s0
    out=$(SMCRUN_REPORT=1 smcrun shapes hammer 127.0.0.1:7102 500 8 2>&1)
    wait $spid
    stats_snap /tmp/sh.s1
    echo "$out"
    cat /tmp/sh.srv
    printf '%s\n' "$out" | grep -q '^made=500 failed=0' || fail "the clients: $(first "$out")"
    for side in "$out" "$(cat /tmp/sh.srv)"; do
        line=$(printf '%s\n' "$side" | grep '^smcrun: pid [0-9]* shapes: ')
        case $line in
        *": 500 connections, "*" 0 TCP"*) ;;
        *) fail "a side does not count exactly 500 connections, none TCP: $line" ;;
        esac
        case $line in *"not classified"*) echo "note: $line" ;; esac
    done
    line=$(vmcheck stats-side /tmp/sh.s0 /tmp/sh.s1 client 500) || fail "$line"
    echo "$line"
    ok
}

# runtime-sysctl: `smcrun --sysctl net.smc.wmem=VALUE` sets the kernel's value before the program runs.
check_runtime_sysctl() {
    need_setup
    [ -e /proc/sys/net/smc/wmem ] || fail "no /proc/sys/net/smc/wmem in this kernel"
    was=$(cat /proc/sys/net/smc/wmem)
    want=$((was + 65536))
    out=$(smcrun --sysctl net.smc.wmem=$want cat /proc/sys/net/smc/wmem 2> /tmp/sy.err) ||
        fail "smcrun --sysctl failed: $(first "$(cat /tmp/sy.err)")"
    [ "$out" = "$want" ] || fail "the program saw net.smc.wmem=$out, expected $want"
    echo "$was" > /proc/sys/net/smc/wmem
    ok
}

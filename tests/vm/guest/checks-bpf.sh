# shellcheck shell=dash
# BPF mode's checks (sourced by checks.sh): programs LD_PRELOAD cannot reach (sechod: static C;
# goecho: Go without cgo; a setuid-root sechod run by an unprivileged user) under `smcrun --bpf`,
# cgroup scopes with `smcrun attach/detach --cgroup`, and the smc module held while attached.
# Every check asserts what the guest kernel did: SO_PROTOCOL of the client's socket, smc_diag
# modes, the SMC-R counters, and the data echoed back. smcrun's JSON (ss, ps --all, attach --list)
# is read by vmcheck (tests/vm/check) into the views' own types; the kernel's stats snapshots by
# checks.sh's helpers (stats_delta, no_fallback, smcr_grew) and vmcheck's stats-smcd.
#
# shellcheck disable=SC2015,SC2086,SC2154

CG=/sys/fs/cgroup

# bpffs for the pins, cgroup2 for cgroup scopes (busybox init mounts neither).
bpf_setup() {
    grep -q ' /sys/fs/bpf bpf ' /proc/mounts || mount -t bpf bpf /sys/fs/bpf ||
        fail "mount -t bpf bpf /sys/fs/bpf failed"
    grep -q " $CG cgroup2 " /proc/mounts || mount -t cgroup2 none $CG ||
        fail "mount -t cgroup2 none $CG failed"
}

# wait_for FILE TEXT [TENTHS]: until FILE holds TEXT (default 10 s)
wait_for() {
    local i=0 max=${3:-100}
    while ! grep -q "$2" "$1" 2>/dev/null; do
        [ $i -ge $max ] && return 1
        sleep 0.1
        i=$((i + 1))
    done
}

# background process of a check, remembered for the cleanup: started with `track CMD...`
track() {
    "$@" &
    echo $! >> /tmp/check.pids
}

# nothing_attached: within 3 s no scope is listed and nothing is pinned
nothing_attached() {
    local o
    o=$(vmcheck --wait 30 bpf-nothing-attached) || fail "still attached after the command ended: $o"
}

# smcr_grew S0 S1 N: client and server SMC-R successes grew by exactly N
smcr_grew() {
    local c s
    c=$(stats_delta "$1" "$2" clnt_succ)
    s=$(stats_delta "$1" "$2" srv_succ)
    echo "SMC-R successes: client +$c, server +$s (expected +$3)"
    [ "$c" = "$3" ] && [ "$s" = "$3" ] || fail "SMC-R successes grew by client +$c server +$s, expected +$3 each"
}

# bpf_echo_pair NAME PORT N SERVER-CMD CLIENT-CMD: N (at most 3) clients, each holding its connection
# until its stdin (a fifo on fd 3+i) is closed, against one server, all under `smcrun --bpf`;
# asserts SMC-R (SMC-D with BPF_MODE=SMCD, on the SMC-D kernel) in smc_diag and the counters, data
# intact, and nothing attached afterwards.
bpf_echo_pair() {
    local name=$1 p=$2 n=$3 srv=$4 cli=$5 i pids= o mode=${BPF_MODE:-SMCR}
    stats_snap /tmp/$name.s0
    track smcrun --bpf -- $srv > /tmp/$name.srv 2>&1
    wait_for /tmp/$name.srv listening 600 || fail "server did not listen: $(first "$(cat /tmp/$name.srv)")"
    i=1
    while [ $i -le $n ]; do
        rm -f /tmp/$name.hold$i
        mkfifo /tmp/$name.hold$i
        sh -c "exec smcrun --bpf -- $cli" < /tmp/$name.hold$i > /tmp/$name.c$i 2>&1 &
        pids="$pids $!"
        eval "exec $((3 + i))> /tmp/$name.hold$i"
        i=$((i + 1))
    done
    i=1
    while [ $i -le $n ]; do
        wait_for /tmp/$name.c$i '^ok ' 900 || fail "client $i: $(first "$(cat /tmp/$name.c$i)")"
        i=$((i + 1))
    done
    o=$(vmcheck ss-port $p $mode $((2 * n))) || fail "$o"
    echo "smc_diag: $o"
    # every process holding SMC sockets, with its BPF scope (smc_diag + /proc/*/fd)
    o=$(vmcheck bpf-ps-trees $mode $((n + 1))) || fail "$o"
    echo "ps --all: $o"
    exec 4>&- 5>&- 6>&-
    for pid in $pids; do wait "$pid" || fail "a client exited non-zero"; done
    wait_for /tmp/$name.srv "served $n" 50 || fail "server: $(lastl "$(cat /tmp/$name.srv)")"
    cat /tmp/$name.srv /tmp/$name.c*
    i=1
    while [ $i -le $n ]; do
        grep -q '^ok .* proto=256$' /tmp/$name.c$i || fail "client $i: socket not IPPROTO_SMC: $(first "$(cat /tmp/$name.c$i)")"
        i=$((i + 1))
    done
    stats_snap /tmp/$name.s1
    if [ "$mode" = SMCD ]; then
        o=$(vmcheck stats-smcd /tmp/$name.s0 /tmp/$name.s1 --client $n --server $n) || fail "$o"
        echo "$o"
    else
        smcr_grew /tmp/$name.s0 /tmp/$name.s1 $n
    fi
    no_fallback /tmp/$name.s0 /tmp/$name.s1
    nothing_attached
}

# bpf-static: a statically linked C server and 3 clients under smcrun --bpf run over SMC-R.
check_bpf_static() {
    need_setup
    need_prog sechod
    bpf_setup
    bpf_echo_pair bstatic 7101 3 "sechod server 127.0.0.1 7101 3" "sechod client 127.0.0.1 7101 262144 stdin"
    ok
}

# bpf-go: a Go server and 3 Go clients (CGO_ENABLED=0) under smcrun --bpf run over SMC-R.
check_bpf_go() {
    need_setup
    need_prog goecho
    bpf_setup
    bpf_echo_pair bgo 7102 3 "goecho server 127.0.0.1:7102 3" "goecho client 127.0.0.1:7102 262144 stdin"
    ok
}

# bpf-setuid: a setuid-root client started by an unprivileged user (LD_PRELOAD is ignored in
# secure mode) gets an SMC socket under smcrun --bpf: real uid 65534, effective 0, SMC-R.
check_bpf_setuid() {
    local p=7103 uid o
    need_setup
    need_prog sechod
    bpf_setup
    grep -q '^nobody:' /etc/passwd 2>/dev/null || {
        echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd
        echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >> /etc/passwd
        echo 'root:x:0:' > /etc/group
        echo 'nogroup:x:65534:' >> /etc/group
    }
    cp /opt/smcrun/bin/sechod /tmp/suid-sechod && chown 0:0 /tmp/suid-sechod && chmod 4755 /tmp/suid-sechod ||
        fail "cannot make /tmp/suid-sechod setuid root"
    stats_snap /tmp/bsuid.s0
    track smcrun --bpf -- sechod server 127.0.0.1 $p 1 > /tmp/bsuid.srv 2>&1
    wait_for /tmp/bsuid.srv listening 600 || fail "server did not listen: $(first "$(cat /tmp/bsuid.srv)")"
    rm -f /tmp/bsuid.hold
    mkfifo /tmp/bsuid.hold
    smcrun --bpf -- su -s /bin/sh nobody -c "/tmp/suid-sechod client 127.0.0.1 $p 262144 stdin" < /tmp/bsuid.hold > /tmp/bsuid.c 2>&1 &
    cpid=$!
    exec 4> /tmp/bsuid.hold
    wait_for /tmp/bsuid.c '^ok ' 600 || fail "setuid client: $(first "$(cat /tmp/bsuid.c)")"
    uid=$(grep '^Uid:' /proc/$(pidof suid-sechod | cut -d' ' -f1)/status 2>/dev/null | tr -s '\t ' ' ')
    echo "setuid client: $uid"
    case $uid in "Uid: 65534 0 "*) ;; *) fail "the client did not run as real uid 65534, effective uid 0: $uid" ;; esac
    o=$(vmcheck ss-port $p SMCR 2) || fail "$o"
    echo "smc_diag: $o"
    exec 4>&-
    wait $cpid || fail "setuid client exited non-zero: $(first "$(cat /tmp/bsuid.c)")"
    wait_for /tmp/bsuid.srv "served 1" 50 || fail "server: $(lastl "$(cat /tmp/bsuid.srv)")"
    cat /tmp/bsuid.c
    grep -q '^ok 262144 proto=256$' /tmp/bsuid.c || fail "setuid client: not IPPROTO_SMC: $(first "$(cat /tmp/bsuid.c)")"
    stats_snap /tmp/bsuid.s1
    smcr_grew /tmp/bsuid.s0 /tmp/bsuid.s1 1
    no_fallback /tmp/bsuid.s0 /tmp/bsuid.s1
    nothing_attached
    ok
}

# start_dialer NAME CGROUP PORT: `sechod dial` in CGROUP, one connection per line written to fd of
# /tmp/NAME.in (kept open by the caller with exec), output in /tmp/NAME.out
start_dialer() {
    mkdir -p "$CG/$2" || fail "mkdir $CG/$2 failed"
    rm -f /tmp/$1.in /tmp/$1.out
    mkfifo /tmp/$1.in
    # (the fifo is opened by the dialer itself: opening it here would wait for a writer)
    track sh -c "echo \$\$ > $CG/$2/cgroup.procs && exec sechod dial 127.0.0.1 $3 65536 < /tmp/$1.in > /tmp/$1.out 2>&1"
}
# dial NAME FD N: ask the dialer for one more connection (the Nth) and wait for its line
dial() {
    echo x >&$2
    local i=0
    while [ "$(grep -c '' /tmp/$1.out 2>/dev/null)" -lt "$3" ]; do
        [ $i -ge 150 ] && fail "dialer $1 gave no line for connection $3: $(lastl "$(cat /tmp/$1.out)")"
        sleep 0.1
        i=$((i + 1))
    done
    sed -n "${3}p" /tmp/$1.out
}

# old_connection NAME FD SERVER-CMD CLIENT-CMD: a connection opened before any attach: SERVER-CMD (a
#   plain `sechod server ... 1`) and CLIENT-CMD (a shell command line ending in `sechod client ... again`),
#   which holds it until fd FD (opened here on /tmp/NAME.old.in) is closed; asserts it is TCP
old_connection() {
    local l
    track $3 > /tmp/$1.srv0 2>&1
    wait_for /tmp/$1.srv0 listening 300 || fail "the TCP server did not listen: $(first "$(cat /tmp/$1.srv0)")"
    rm -f /tmp/$1.old.in
    mkfifo /tmp/$1.old.in
    track sh -c "$4 < /tmp/$1.old.in > /tmp/$1.old 2>&1"
    eval "exec $2> /tmp/$1.old.in"
    wait_for /tmp/$1.old '^ok ' 300 || fail "the old client: $(first "$(cat /tmp/$1.old)")"
    l=$(head -n1 /tmp/$1.old)
    echo "old connection (before attach): $l"
    [ "$l" = "ok 65536 proto=6" ] || fail "the old connection before attach: expected TCP (proto=6), got: $l"
}
# old_again NAME: once its fd is closed, the old connection echoed once more, still TCP, and its server
#   saw it end well
old_again() {
    local l
    wait_for /tmp/$1.old '^again ' 300 || fail "the old connection after the attach: $(lastl "$(cat /tmp/$1.old)")"
    l=$(sed -n 2p /tmp/$1.old)
    echo "old connection, after the attach: $l"
    [ "$l" = "again 65536 proto=6" ] || fail "the old connection after the attach: expected TCP echoing (again 65536 proto=6), got: $l"
    wait_for /tmp/$1.srv0 "served 1" 100 || fail "the old connection's server: $(lastl "$(cat /tmp/$1.srv0)")"
}

# bpf-cgroup: a program already running in a cgroup: its connection before attach is TCP, the one
# after `smcrun attach --cgroup` SMC-R, and after `smcrun detach` TCP again; a connection the
# cgroup held open from before the attach stays TCP (smc_diag lists nothing on its port) and
# still echoes afterwards.
check_bpf_cgroup() {
    local p=7104 p0=7108 l out
    need_setup
    need_prog sechod
    bpf_setup
    track smcrun --bpf -- sechod server 127.0.0.1 $p 3 > /tmp/bcg.srv 2>&1
    wait_for /tmp/bcg.srv listening 600 || fail "server did not listen: $(first "$(cat /tmp/bcg.srv)")"
    start_dialer bcg smcrun-a $p
    exec 7> /tmp/bcg.in
    # the old connection: a plain TCP server outside the cgroup, a client in it holding it open
    old_connection bcg 6 "sechod server 127.0.0.1 $p0 1" "echo \$\$ > $CG/smcrun-a/cgroup.procs && exec sechod client 127.0.0.1 $p0 65536 again"
    l=$(dial bcg 7 1)
    echo "before attach: $l"
    [ "$l" = "ok 65536 proto=6" ] || fail "before attach: expected TCP (proto=6), got: $l"
    # (fd 6, the old client's fifo, stays open here on purpose: the attach's holder, which lives
    # until the detach, must close what it inherits, or this substitution never ends)
    out=$(smcrun attach --cgroup $CG/smcrun-a 2>&1) || fail "smcrun attach --cgroup failed: $(first "$out")"
    echo "$out"
    stats_snap /tmp/bcg.s1
    l=$(dial bcg 7 2)
    echo "attached: $l"
    [ "$l" = "ok 65536 proto=256" ] || fail "after attach: expected IPPROTO_SMC (proto=256), got: $l"
    stats_snap /tmp/bcg.s2
    smcr_grew /tmp/bcg.s1 /tmp/bcg.s2 1
    no_fallback /tmp/bcg.s1 /tmp/bcg.s2
    l=$(vmcheck ss-none $p0) || fail "the old TCP connection (port $p0) became an SMC socket while attached: $l"
    smcrun attach --list
    out=$(vmcheck bpf-cgroup $CG/smcrun-a 1 sechod) || fail "$out"
    grep -q '^smc ' /proc/modules && [ -n "$(pidof smcrun)" ] || fail "no holder process (smcrun) runs while attached"
    out=$(smcrun detach --cgroup $CG/smcrun-a 2>&1) || fail "smcrun detach failed: $(first "$out")"
    echo "$out"
    case $out in *"1 socket made SMC"*"nothing is attached any more"*) ;; *) fail "detach said: $out" ;; esac
    l=$(dial bcg 7 3)
    echo "detached: $l"
    [ "$l" = "ok 65536 proto=6" ] || fail "after detach: expected TCP (proto=6), got: $l"
    exec 7>&- 6>&-
    old_again bcg
    out=$(smcrun detach --cgroup $CG/smcrun-a 2>&1) && fail "a second detach succeeded: $out"
    echo "second detach: $out"
    nothing_attached
    ok
}

# bpf-scopes: two attached cgroups and a process tree at once: each counts its own sockets, a
# per-program rule (in the kernel) keeps one cgroup's program on TCP, a cgroup in no scope stays TCP.
check_bpf_scopes() {
    local p=7105 la lb lc out
    need_setup
    need_prog sechod
    bpf_setup
    track smcrun --bpf -- sechod server 127.0.0.1 $p 5 > /tmp/bsc.srv 2>&1 # outlives the 4 dials
    wait_for /tmp/bsc.srv listening 600 || fail "server did not listen: $(first "$(cat /tmp/bsc.srv)")"
    start_dialer bsa scope-a $p
    start_dialer bsb scope-b $p
    start_dialer bsc scope-c $p
    exec 7> /tmp/bsa.in 8> /tmp/bsb.in 9> /tmp/bsc.in
    out=$(smcrun attach --cgroup /scope-a 2>&1) || fail "attach /scope-a (below the cgroup2 root) failed: $(first "$out")"
    out=$(smcrun attach --cgroup $CG/scope-b --policy 'tcp program sechod; smc' 2>&1) || fail "attach scope-b failed: $(first "$out")"
    out=$(smcrun attach --cgroup $CG/scope-b --policy 'tcp program /opt/*' 2>&1) && fail "a path rule was accepted: $out"
    echo "refused: $out"
    la=$(dial bsa 7 1)
    lb=$(dial bsb 8 1)
    lc=$(dial bsc 9 1)
    echo "scope-a: $la; scope-b (tcp program sechod): $lb; scope-c (not attached): $lc"
    [ "$la" = "ok 65536 proto=256" ] || fail "scope-a: expected SMC, got $la"
    [ "$lb" = "ok 65536 proto=6" ] || fail "scope-b's rule 'tcp program sechod' did not keep it TCP: $lb"
    [ "$lc" = "ok 65536 proto=6" ] || fail "scope-c (in no scope) leaked into SMC: $lc"
    smcrun attach --list
    out=$(vmcheck bpf-scopes cgroup:$CG/scope-a:1:0 cgroup:$CG/scope-b:0:1 tree:-:1:0) || fail "$out"
    echo "scopes: $out"
    smcrun detach --cgroup $CG/scope-a > /dev/null 2>&1 || fail "detach scope-a failed"
    lb=$(dial bsb 8 2)
    [ "$lb" = "ok 65536 proto=6" ] || fail "scope-b after scope-a left: $lb"
    smcrun detach --cgroup scope-b > /dev/null 2>&1 && fail "detach of a relative name that is no cgroup path succeeded"
    smcrun detach --cgroup $CG/scope-b > /dev/null 2>&1 || fail "detach scope-b failed"
    exec 7>&- 8>&- 9>&-
    ok
}

# bpf-module: while attached, `rmmod smc` fails (the holder's SMC socket); once the tree is gone
# it succeeds; with smc missing, --bpf refuses (exit 125, nothing attached) and --bpf=auto runs the
# program over TCP. The module and the UEID are put back.
check_bpf_module() {
    local p=7106 out rc
    need_setup
    need_prog sechod
    bpf_setup
    track smcrun --bpf -- sleep 4
    out=$(vmcheck --wait 300 bpf-trees 1) || fail "the tree scope of smcrun --bpf -- sleep 4 is not listed: $out"
    rmmod smc_diag 2>/dev/null
    out=$(rmmod smc 2>&1) && { insmod /vm/lib/modules/smc.ko; fail "rmmod smc succeeded while attached"; }
    echo "rmmod smc while attached: $out"
    grep -q '^smc ' /proc/modules || fail "smc is gone although rmmod failed"
    sleep 4
    nothing_attached
    smc_unload || fail "rmmod smc kept failing for 20 s after the tree ended (something else holds it?): $(first "$(cat /tmp/smc.rmmod)")"
    grep -q '^smc ' /proc/modules && fail "smc still loaded after rmmod"
    out=$(smcrun --bpf -- sechod client 127.0.0.1 $p 1000 2>&1)
    rc=$?
    echo "without smc: rc=$rc $out"
    [ $rc = 125 ] || fail "--bpf without smc exited $rc, expected 125: $out"
    case $out in *"SMC (the smc module) is missing"*"nothing was attached"*) ;; *) fail "--bpf without smc said: $out" ;; esac
    nothing_attached
    track sechod server 127.0.0.1 $p 1 > /tmp/bmod.srv 2>&1
    wait_for /tmp/bmod.srv listening || fail "plain server did not listen"
    out=$(smcrun --bpf=auto -- sechod client 127.0.0.1 $p 65536 2>&1)
    rc=$?
    echo "--bpf=auto without smc: rc=$rc $out"
    [ $rc = 0 ] && printf '%s\n' "$out" | grep -q '^ok 65536 proto=6$' || fail "--bpf=auto without smc: rc=$rc $out"
    out=$(smc_reload) || fail "loading smc again: $out"
    ok
}

# handshake-old: on a kernel without the SMC handshake hook (Debian's 6.12: no smc_hs_ctrl, no
#   net.smc.hs_ctrl) `smcrun handshake load|status|unload` each print one line naming Linux 6.19 and
#   exit 125 (not possible here); nothing is left on bpffs.
check_handshake_old() {
    [ ! -e /proc/sys/net/smc/hs_ctrl ] || fail "this kernel has net.smc.hs_ctrl: handshake-old needs one without it"
    for c in load status unload; do
        if [ $c = load ]; then
            o=$(smcrun handshake load --policy 'smc port 6379; tcp' 2>&1)
        else
            o=$(smcrun handshake $c 2>&1)
        fi
        rc=$?
        echo "handshake $c: rc=$rc $o"
        [ $rc = 125 ] && [ "$(printf '%s\n' "$o" | grep -c .)" = 1 ] && case $o in *"Linux 6.19"*) true ;; *) false ;; esac ||
            fail "smcrun handshake $c on $(uname -r): rc $rc, $(printf '%s' "$o" | tr '\n' '|'), expected one line naming Linux 6.19 and exit 125"
    done
    [ ! -e /sys/fs/bpf/smcrun-handshake ] || fail "a refused handshake load left /sys/fs/bpf/smcrun-handshake"
    ok
}

# shellcheck shell=dash
# Checks of the project's own 7.3 kernel (`tests/vm/run --kernel 7.3`), sourced by checks.sh: SMC-D over
# the DIBS loopback (7.x's replacement of SMC_LO) and SMC-R over soft-RoCE are proven by the SMC-D
# suite's checks (checks-smcd.sh), which run unchanged here; these add what 7.3 brings: its net.smc
# sysctls, and the operator's tools on it. Uses the plumbing of checks.sh (fail, ok, bg, ...).
#
# smcrun's JSON, the kernel's stats snapshots (`smcrun stats --json`) too, is read by vmcheck
# (tests/vm/check), into the views' own types.
#
# shellcheck disable=SC2015,SC2086,SC2154
# (SC2015: `[ a ] && [ b ] || fail` means "fail unless both"; SC2086: word lists split on purpose;
# SC2154: variables set by checks.sh and init.)

# The net.smc sysctls 7.3 has (read from its net/smc/smc_sysctl.c; hs_ctrl names a BPF struct_ops,
# the others are numbers).
K73_SYSCTLS="autocorking_size hs_ctrl limit_smc_hs rmem smcr_buf_type smcr_max_conns_per_lgr smcr_max_links_per_lgr smcr_max_recv_wr smcr_max_send_wr smcr_testlink_time wmem"
CHECK_LIMIT_k73_ops=150

# k73-sysctls: every one of 7.3's net.smc sysctls is there; `smcrun --sysctl` sets each numeric one
# (to its own value: the set-up's state stays) and a bad hs_ctrl name is refused in one line naming
# it; doctor lists all eleven; the exporter has each numeric one as smc_sysctl{name} with its value.
check_k73_sysctls() {
    need_prog sockcheck
    for s in $K73_SYSCTLS; do
        [ -e "/proc/sys/net/smc/$s" ] || fail "7.3 has no net.smc.$s"
    done
    n=$(ls /proc/sys/net/smc | wc -l)
    [ "$n" = 11 ] || fail "net.smc has $n sysctls, expected 11: $(ls /proc/sys/net/smc | tr '\n' ' ')"
    for s in $K73_SYSCTLS; do
        [ "$s" = hs_ctrl ] && continue
        v=$(cat "/proc/sys/net/smc/$s")
        o=$(smcrun --sysctl "net.smc.$s=$v" sockcheck identity 2>&1)
        rc=$?
        [ $rc = 0 ] || fail "smcrun --sysctl net.smc.$s=$v exited $rc: $(first "$o")"
        [ "$(cat "/proc/sys/net/smc/$s")" = "$v" ] || fail "net.smc.$s is $(cat "/proc/sys/net/smc/$s") after setting it to $v"
    done
    # a changed value applies, and is there for the next connection: smcr_max_send_wr 16 -> 32 -> back
    old=$(cat /proc/sys/net/smc/smcr_max_send_wr)
    o=$(smcrun --sysctl net.smc.smcr_max_send_wr=32 sockcheck identity 2>&1) || fail "smcrun --sysctl net.smc.smcr_max_send_wr=32: $(first "$o")"
    [ "$(cat /proc/sys/net/smc/smcr_max_send_wr)" = 32 ] || fail "net.smc.smcr_max_send_wr not 32 after --sysctl"
    echo "$old" > /proc/sys/net/smc/smcr_max_send_wr
    o=$(smcrun --sysctl net.smc.hs_ctrl=no_such_ops sockcheck identity 2>&1)
    rc=$?
    echo "--sysctl net.smc.hs_ctrl=no_such_ops: rc=$rc $o"
    [ $rc = 1 ] && [ "$(printf '%s\n' "$o" | grep -c .)" = 1 ] && case $o in *net.smc.hs_ctrl*) true ;; *) false ;; esac ||
        fail "smcrun --sysctl net.smc.hs_ctrl=no_such_ops: rc $rc, $(printf '%s' "$o" | tr '\n' '|'), expected one line naming net.smc.hs_ctrl and exit 1"
    # doctor: all eleven
    smcrun doctor --json > /tmp/k7.doctor 2>/dev/null
    d=$(vmcheck doctor-sysctls /tmp/k7.doctor $K73_SYSCTLS) || fail "$d"
    echo "doctor: $d"
    # the exporter: each numeric one with its value
    m=$(smcrun metrics 2>&1) || fail "smcrun metrics failed: $(first "$m")"
    for s in $K73_SYSCTLS; do
        [ "$s" = hs_ctrl ] && continue
        printf '%s\n' "$m" | grep -qx "smc_sysctl{name=\"$s\"} $(cat "/proc/sys/net/smc/$s")" ||
            fail "smcrun metrics has no smc_sysctl{name=\"$s\"} $(cat "/proc/sys/net/smc/$s"): $(printf '%s\n' "$m" | grep "name=\"$s\"")"
    done
    ok
}

# k73-ops: the exporter and doctor on 7.3 with SMC-D connections open: smc_up 1, no scrape error,
# SMC-D connection counters non-zero; doctor: smc_diag (built in) passes, and so do the kernel,
# IPPROTO_SMC and BPF mode's prerequisites.
check_k73_ops() {
    need_setup
    need_prog redis-server redis-benchmark
    p=6392
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 300 ss-port $p SMCD 2 --served) || fail "no SMC-D connections on port $p: $o"
    m=$(smcrun metrics 2>&1) || fail "smcrun metrics failed: $(first "$m")"
    printf '%s\n' "$m" | grep -qx 'smc_up 1' || fail "smcrun metrics: no smc_up 1"
    printf '%s\n' "$m" | grep -qx 'smcrun_scrape_errors_total 0' || fail "smcrun metrics: $(printf '%s\n' "$m" | grep '^smcrun_scrape_errors_total')"
    v=$(printf '%s\n' "$m" | sed -n 's/^smc_connections_total{technology="smcd",role="server",version="v2"} //p')
    [ "${v:-0}" -ge 2 ] || fail "smcrun metrics: SMC-D server v2 connections ${v:-none}, expected ≥ 2"
    smcrun doctor --json --bpf > /tmp/kd.json 2>/dev/null
    rc=$?
    o=$(vmcheck doctor-passed /tmp/kd.json --exit $rc kernel smc smc_diag smc-rv2 sysctls ipv6-java bpf:kernel bpf:hook bpf:smc bpf:load) ||
        fail "$o"
    echo "doctor: $o"
    ok
}

# hs_client PORT TAG: one native AF_SMC client to 127.0.0.1:PORT (smcnative: no smcrun in it), held
#   3 s while `smcrun ss -a --json` is saved to /tmp/hs.ss.TAG; the kernel's stats before and after
#   in /tmp/hs.s0.TAG and /tmp/hs.s1.TAG; the data must come back intact.
hs_client() {
    stats_snap /tmp/hs.s0.$2
    bg smcnative client $1 100000 3 > /tmp/hs.c.$2 2>&1
    cpid=$(tail -n1 /tmp/check.pids)
    rm -f /tmp/hs.ss.$2
    until grep -q "\"peer\": \"127.0.0.1:$1\"" /tmp/hs.ss.$2 2> /dev/null; do
        kill -0 "$cpid" 2> /dev/null || break
        sleep 0.1
        sd_ss /tmp/hs.ss.$2 -a
    done
    wait "$cpid"
    crc=$?
    stats_snap /tmp/hs.s1.$2
    [ $crc = 0 ] && grep -q '^ok 100000' /tmp/hs.c.$2 || fail "native AF_SMC client to $1 ($2, rc $crc): $(first "$(cat /tmp/hs.c.$2)")"
}

# hs_split CHECK WHERE TAG79 TAG80: what the policy $pol ('smc port 6379; tcp') must do, in sock_diag's
#   /tmp/hs.ss.TAG (hs_client, hn_client): the client to 6379 runs SMC-D, the one to 6380 is TCP with
#   0x03010000 PEERNOSMC; both handshake checks ask it, of the init namespace's handshake and of one
#   loaded into a namespace WHERE (empty: here), and say it in lines that start with CHECK.
hs_split() {
    o=$(vmcheck ss-connection /tmp/hs.ss.$3 6379 SMCD) || fail "${2:+$2, }under '$pol', in sock_diag, $o$(smcd_why)"
    echo "$1: ${2:+$2 }under '$pol': 6379 $o"
    o=$(vmcheck ss-connection /tmp/hs.ss.$4 6380 TCP --reason 0x03010000) || fail "${2:+$2, }under '$pol', in sock_diag, $o (PEERNOSMC)"
    echo "$1: ${2:+$2 }under '$pol': 6380 $o"
}

# k73-handshake: `smcrun handshake load --policy 'smc port 6379; tcp'` puts the policy into the
#   kernel's SMC handshake (smc_hs_ctrl, net.smc.hs_ctrl): a native AF_SMC client (no smcrun, no
#   preload) to a native AF_SMC server on 6379 runs SMC-D, one to 6380 is TCP, both sides fallen back
#   with 0x03010000 PEERNOSMC, as sock_diag shows and the kernel's SMC stats count; `handshake status`
#   shows the policy and the kernel's decisions; `handshake unload` clears the sysctl and 6380 runs
#   SMC-D again, and a second load and unload in the same boot work (the unload took the kernel's
#   registration back); a policy with a program rule is refused (exit 2) and nothing is loaded.
check_k73_handshake() {
    need_setup
    need_prog smcnative
    pol='smc port 6379; tcp'
    bg smcnative server 6379 > /tmp/hs.srv6379 2>&1
    bg smcnative server 6380 > /tmp/hs.srv6380 2>&1
    o=$(smcrun handshake load --policy 'tcp program redis-server; smc' 2>&1)
    rc=$?
    [ $rc = 2 ] && case $o in *"names programs"*) true ;; *) false ;; esac || fail "handshake load of a program rule: rc $rc, $(first "$o"), expected exit 2 naming the program rule"
    [ -z "$(cat /proc/sys/net/smc/hs_ctrl)" ] || fail "a refused handshake load left net.smc.hs_ctrl = $(cat /proc/sys/net/smc/hs_ctrl)"
    o=$(smcrun handshake load --policy "$pol" 2>&1) || fail "smcrun handshake load --policy '$pol': $(first "$o")"
    echo "$o"
    sel=$(cat /proc/sys/net/smc/hs_ctrl)
    case $sel in smcrun_*) ;; *) fail "after handshake load net.smc.hs_ctrl is '$sel', expected smcrun's" ;; esac
    sleep 1
    hs_client 6379 on79
    hs_client 6380 on80
    hs_split k73-handshake '' on79 on80
    o=$(vmcheck stats-smcd /tmp/hs.s0.on79 /tmp/hs.s1.on79 --client 1 --server 1 --client-fallbacks 0 --server-fallbacks 0) ||
        fail "kernel stats for 6379: $o"
    echo "k73-handshake: kernel stats: 6379 $o"
    o=$(vmcheck stats-smcd /tmp/hs.s0.on80 /tmp/hs.s1.on80 --client 0 --client-fallbacks 1 --client-peernosmc 1 --server-fallbacks 1 --server-peernosmc 1) ||
        fail "kernel stats for 6380: $o"
    echo "k73-handshake: kernel stats: 6380 $o"
    smcrun handshake status --json > /tmp/hs.st 2>&1 || fail "smcrun handshake status --json: $(first "$(cat /tmp/hs.st)")"
    o=$(vmcheck handshake-ours /tmp/hs.st --selected "$sel" --policy "$pol" --decided client-smc --decided client-tcp --decided server-smc) ||
        fail "handshake status: $o"
    echo "k73-handshake: status: $o; $(smcrun handshake status | sed -n 2p)"
    o=$(smcrun handshake unload 2>&1) || fail "smcrun handshake unload: $(first "$o")"
    [ -z "$(cat /proc/sys/net/smc/hs_ctrl)" ] || fail "after handshake unload net.smc.hs_ctrl is '$(cat /proc/sys/net/smc/hs_ctrl)'"
    [ ! -e /sys/fs/bpf/smcrun-handshake/net-"$(stat -L -c %i /proc/self/ns/net)" ] || fail "handshake unload left its pins"
    hs_client 6380 off80
    o=$(vmcheck ss-connection /tmp/hs.ss.off80 6380 SMCD) || fail "after handshake unload $o"
    echo "k73-handshake: after unload: 6380 $o"
    # the unload took the registration back too (the struct_ops name is the kernel's, global): a
    # second load in the same boot registers the same name again, and a second unload clears it
    o=$(smcrun handshake load --policy "$pol" 2>&1) || fail "a second handshake load after the unload: $(first "$o")"
    case $(cat /proc/sys/net/smc/hs_ctrl) in smcrun_*) ;; *) fail "after the second handshake load net.smc.hs_ctrl is '$(cat /proc/sys/net/smc/hs_ctrl)'" ;; esac
    o=$(smcrun handshake unload 2>&1) || fail "the second handshake unload: $(first "$o")"
    [ -z "$(cat /proc/sys/net/smc/hs_ctrl)" ] || fail "after the second handshake unload net.smc.hs_ctrl is '$(cat /proc/sys/net/smc/hs_ctrl)'"
    ok
}

# k73-handshake-netns: `smcrun handshake load --netns /run/netns/NAME` puts the policy into that
#   network namespace's handshake only (net.smc.hs_ctrl is per namespace): inside it, a native
#   AF_SMC client to 6379 runs SMC-D and one to 6380 is TCP with PEERNOSMC on both sides, while in
#   smcrun's own namespace, at the same time, a native client to 6380 still runs SMC-D and hs_ctrl
#   stays empty; `handshake status --netns` names that namespace's inode and shows ours selected,
#   and so does `status --netns PID` of a process in it; `handshake status` here shows nothing of
#   ours; `unload --netns` clears it there; a --netns that is no namespace is refused in one line
#   naming it.
check_k73_handshake_netns() {
    need_setup
    need_prog smcnative
    [ -x $IP ] || fail "$IP (iproute2) is not in the guest"
    pol='smc port 6379; tcp'
    ns=hs-ns
    mkdir -p /var/run
    $IP netns del $ns 2> /dev/null
    o=$($IP netns add $ns 2>&1) || fail "ip netns add $ns: $(first "$o")"
    $IP -n $ns link set lo up || fail "ip -n $ns link set lo up failed"
    nsino=$(stat -L -c %i /run/netns/$ns)
    echo "k73-handshake-netns: $ns is /run/netns/$ns, inode $nsino"
    o=$(smcrun handshake load --netns /run/netns/nowhere --policy "$pol" 2>&1)
    rc=$?
    [ $rc != 0 ] && [ "$(printf '%s\n' "$o" | wc -l)" = 1 ] && case $o in *"/run/netns/nowhere"*) true ;; *) false ;; esac ||
        fail "handshake load --netns /run/netns/nowhere: rc $rc, '$o', expected one line naming the path and a non-zero exit"
    bg $IP netns exec $ns smcnative server 6379 > /tmp/hn.srv6379 2>&1
    bg $IP netns exec $ns smcnative server 6380 > /tmp/hn.srv6380 2>&1
    inpid=$(tail -n1 /tmp/check.pids)
    bg smcnative server 6380 > /tmp/hn.srvhere 2>&1
    o=$(smcrun handshake load --netns /run/netns/$ns --policy "$pol" 2>&1) || fail "smcrun handshake load --netns /run/netns/$ns: $(first "$o")"
    echo "$o"
    there=$($IP netns exec $ns cat /proc/sys/net/smc/hs_ctrl)
    here=$(cat /proc/sys/net/smc/hs_ctrl)
    echo "k73-handshake-netns: net.smc.hs_ctrl in $ns '$there', here '$here'"
    case $there in smcrun_*) ;; *) fail "after handshake load --netns, net.smc.hs_ctrl in $ns is '$there', expected smcrun's" ;; esac
    [ -z "$here" ] || fail "a handshake load into $ns set net.smc.hs_ctrl here to '$here'"
    sleep 1
    # hn_client PORT TAG: a native client in $ns, `smcrun ss -a --json` in $ns into /tmp/hs.ss.TAG
    hn_client() {
        bg $IP netns exec $ns smcnative client $1 100000 3 > /tmp/hn.c.$2 2>&1
        cpid=$(tail -n1 /tmp/check.pids)
        rm -f /tmp/hs.ss.$2
        until grep -q "\"peer\": \"127.0.0.1:$1\"" /tmp/hs.ss.$2 2> /dev/null; do
            kill -0 "$cpid" 2> /dev/null || break
            sleep 0.1
            $IP netns exec $ns smcrun ss -a --json > /tmp/hs.ss.$2 2>&1
        done
        wait "$cpid"
        crc=$?
        [ $crc = 0 ] && grep -q '^ok 100000' /tmp/hn.c.$2 || fail "native AF_SMC client in $ns to $1 (rc $crc): $(first "$(cat /tmp/hn.c.$2)")"
    }
    hn_client 6379 ns79
    hn_client 6380 ns80
    hs_client 6380 here80
    hs_split k73-handshake-netns "in $ns" ns79 ns80
    o=$(vmcheck ss-connection /tmp/hs.ss.here80 6380 SMCD) || fail "here, outside $ns, $o: the policy leaked out of $ns"
    echo "k73-handshake-netns: here: 6380 $o"
    smcrun handshake status --netns /run/netns/$ns --json > /tmp/hn.st 2>&1 || fail "smcrun handshake status --netns: $(first "$(cat /tmp/hn.st)")"
    o=$(vmcheck handshake-ours /tmp/hn.st --netns $nsino --selected "$there" --decided client-tcp) ||
        fail "handshake status --netns /run/netns/$ns: $o"
    echo "k73-handshake-netns: status in $ns (inode $nsino): $o"
    # the namespace named by a process in it, as `attach --netns PID` takes it
    smcrun handshake status --netns $inpid --json > /tmp/hn.stpid 2>&1 || fail "smcrun handshake status --netns $inpid (a process in $ns): $(first "$(cat /tmp/hn.stpid)")"
    o=$(vmcheck handshake-ours /tmp/hn.stpid --netns $nsino) || fail "handshake status --netns $inpid: $o"
    smcrun handshake status --json > /tmp/hn.sthere 2>&1 || fail "smcrun handshake status: $(first "$(cat /tmp/hn.sthere)")"
    o=$(vmcheck handshake-none /tmp/hn.sthere --not-netns $nsino) || fail "handshake status here: $o"
    o=$(smcrun handshake unload --netns /run/netns/$ns 2>&1) || fail "smcrun handshake unload --netns: $(first "$o")"
    there=$($IP netns exec $ns cat /proc/sys/net/smc/hs_ctrl)
    [ -z "$there" ] || fail "after handshake unload --netns, net.smc.hs_ctrl in $ns is '$there'"
    [ ! -e /sys/fs/bpf/smcrun-handshake/net-$nsino ] || fail "handshake unload --netns left its pins"
    cleanup_procs
    $IP netns del $ns
    ok
}

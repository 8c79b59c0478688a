# shellcheck shell=dash
# Checks of the project's own 7.3 kernel (`tests/vm/run --kernel 7.3`), sourced by checks.sh: SMC-D over
# the DIBS loopback (7.x's replacement of SMC_LO) and SMC-R over soft-RoCE are proven by the SMC-D
# suite's checks (checks-smcd.sh), which run unchanged here; these add what 7.3 brings: its net.smc
# sysctls, and the operator's tools on it. Uses the plumbing of checks.sh (fail, ok, bg, ...).
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2154
# (SC2015: `[ a ] && [ b ] || fail` means "fail unless both"; SC2086: word lists split on purpose;
# SC2016: jq programs in single quotes; SC2154: variables set by checks.sh and init.)

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
    d=$(smcrun doctor --json 2>/dev/null | jq -r '.checks[] | select(.id == "sysctls") | "\(.status) \(.detail)"')
    echo "doctor: $d"
    case $d in pass*) ;; *) fail "doctor's sysctls check: $d" ;; esac
    for s in $K73_SYSCTLS; do
        case " ${d#pass net.smc.*: } " in *" $s="*) ;; *) fail "doctor's sysctls check does not list $s: $d" ;; esac
    done
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
    sd_wait /tmp/ko.ss ".lport == $p and .mode == \"SMCD\"" 2 30 || fail "no SMC-D connections on port $p: $(first "$(cat /tmp/ko.ss)")"
    m=$(smcrun metrics 2>&1) || fail "smcrun metrics failed: $(first "$m")"
    printf '%s\n' "$m" | grep -qx 'smc_up 1' || fail "smcrun metrics: no smc_up 1"
    printf '%s\n' "$m" | grep -qx 'smcrun_scrape_errors_total 0' || fail "smcrun metrics: $(printf '%s\n' "$m" | grep '^smcrun_scrape_errors_total')"
    v=$(printf '%s\n' "$m" | sed -n 's/^smc_connections_total{technology="smcd",role="server",version="v2"} //p')
    [ "${v:-0}" -ge 2 ] || fail "smcrun metrics: SMC-D server v2 connections ${v:-none}, expected ≥ 2"
    smcrun doctor --json --bpf > /tmp/kd.json 2>/dev/null
    rc=$?
    set -- $(jq -r '"\(.exit_code) \([.checks[] | select(.status == "pass") | .id] | join(","))"' /tmp/kd.json)
    echo "doctor: exit $rc (JSON $1), passed: $2"
    [ "$1" = $rc ] || fail "smcrun doctor exited $rc, its JSON says $1"
    for c in kernel smc smc_diag smc-rv2 sysctls ipv6-java bpf:kernel bpf:hook bpf:smc bpf:load; do
        case ",$2," in *",$c,"*) ;; *) fail "doctor: $c did not pass: $(jq -c --arg c $c '.checks[] | select(.id == $c)' /tmp/kd.json)" ;; esac
    done
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
# hs_modes TAG PORT: "CLIENT-MODE CLIENT-REASON SERVER-MODE SERVER-REASON" of the connection to PORT
#   in /tmp/hs.ss.TAG (the client: peer port PORT; the server: local port PORT, not listening)
hs_modes() {
    jq -n -r --slurpfile a /tmp/hs.ss.$1 "
        def one(f): [(\$a[0] | $SS_JQ) | select(f)][0] // {mode: \"none\"};
        (one(.rport == $2 and .lport != 0)) as \$c | (one(.lport == $2 and .rport != 0)) as \$s |
        [\$c.mode, (\$c.reason // \"-\"), \$s.mode, (\$s.reason // \"-\")] | join(\" \")" 2>&1
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
    set -- $(hs_modes on79 6379) $(hs_modes on80 6380)
    echo "k73-handshake: under '$pol': 6379 client $1 $2, server $3 $4; 6380 client $5 $6, server $7 $8"
    [ "$1" = SMCD ] && [ "$3" = SMCD ] || fail "the native connection to 6379 under '$pol' is client $1, server $3 in sock_diag, expected SMCD both$(smcd_why)"
    [ "$5" = TCP ] && [ "$6" = 0x03010000 ] && [ "$7" = TCP ] && [ "$8" = 0x03010000 ] ||
        fail "the native connection to 6380 under '$pol' is client $5 ($6), server $7 ($8), expected TCP with 0x03010000 PEERNOSMC both"
    smcd_deltas /tmp/hs.s0.on79 /tmp/hs.s1.on79
    set -- $DELTAS
    dc79=$1 ds79=$2 fb79=$(($4 + $5))
    smcd_deltas /tmp/hs.s0.on80 /tmp/hs.s1.on80
    set -- $DELTAS
    dc80=$1 cf80=$4 sf80=$5 pn80=$6
    cpn80=$(jq -n --slurpfile a /tmp/hs.s0.on80 --slurpfile b /tmp/hs.s1.on80 '
        def pn: [.fallback.clnt_reasons[] | select(.hex == "0x03010000") | .count] | add // 0;
        ($b[0] | pn) - ($a[0] | pn)')
    echo "k73-handshake: kernel stats: 6379 SMC-D client succ +$dc79 server succ +$ds79 fallbacks +$fb79; 6380 SMC-D client succ +$dc80, fallbacks client +$cf80 (PEERNOSMC +$cpn80) server +$sf80 (PEERNOSMC +$pn80)"
    [ "$dc79" = 1 ] && [ "$ds79" = 1 ] && [ "$fb79" = 0 ] || fail "kernel stats for 6379: SMC-D client +$dc79, server +$ds79, fallbacks +$fb79; expected 1, 1, 0"
    [ "$dc80" = 0 ] && [ "$cf80" = 1 ] && [ "$sf80" = 1 ] && [ "$pn80" = 1 ] && [ "$cpn80" = 1 ] ||
        fail "kernel stats for 6380: SMC-D client +$dc80, client fallbacks +$cf80 (PEERNOSMC +$cpn80), server fallbacks +$sf80 (PEERNOSMC +$pn80); expected 0, 1 (1), 1 (1)"
    smcrun handshake status --json > /tmp/hs.st 2>&1 || fail "smcrun handshake status --json: $(first "$(cat /tmp/hs.st)")"
    set -- $(jq -r '"\(.selected) \(.policy.selected) \(.policy.client_smc) \(.policy.client_tcp) \(.policy.server_smc)"' /tmp/hs.st)
    echo "k73-handshake: status: selected $1 (ours: $2), client SYNs $3 SMC $4 TCP, server SYN-ACKs $5 SMC; $(smcrun handshake status | sed -n 2p)"
    [ "$1" = "$sel" ] && [ "$2" = true ] && [ "$3" -ge 1 ] && [ "$4" -ge 1 ] && [ "$5" -ge 1 ] ||
        fail "handshake status: $(tr '\n' ' ' < /tmp/hs.st | cut -c1-200), expected $sel selected with ≥ 1 client SMC, client TCP and server SMC decisions"
    [ "$(jq -r .policy.text /tmp/hs.st)" = "$pol" ] || fail "handshake status shows the policy '$(jq -r .policy.text /tmp/hs.st)', expected '$pol'"
    o=$(smcrun handshake unload 2>&1) || fail "smcrun handshake unload: $(first "$o")"
    [ -z "$(cat /proc/sys/net/smc/hs_ctrl)" ] || fail "after handshake unload net.smc.hs_ctrl is '$(cat /proc/sys/net/smc/hs_ctrl)'"
    [ ! -e /sys/fs/bpf/smcrun-handshake/net-"$(stat -L -c %i /proc/self/ns/net)" ] || fail "handshake unload left its pins"
    hs_client 6380 off80
    set -- $(hs_modes off80 6380)
    echo "k73-handshake: after unload: 6380 client $1 $2, server $3 $4"
    [ "$1" = SMCD ] && [ "$3" = SMCD ] || fail "after handshake unload the native connection to 6380 is client $1 ($2), server $3 ($4), expected SMCD both"
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
    set -- $(hs_modes ns79 6379) $(hs_modes ns80 6380) $(hs_modes here80 6380)
    echo "k73-handshake-netns: in $ns under '$pol': 6379 client $1 $2, server $3 $4; 6380 client $5 $6, server $7 $8; here 6380 client $9 ${10}, server ${11} ${12}"
    [ "$1" = SMCD ] && [ "$3" = SMCD ] || fail "in $ns the native connection to 6379 is client $1, server $3, expected SMCD both"
    [ "$5" = TCP ] && [ "$6" = 0x03010000 ] && [ "$7" = TCP ] && [ "$8" = 0x03010000 ] ||
        fail "in $ns the native connection to 6380 is client $5 ($6), server $7 ($8), expected TCP with 0x03010000 PEERNOSMC both"
    [ "$9" = SMCD ] && [ "${11}" = SMCD ] || fail "here, outside $ns, the native connection to 6380 is client $9 (${10}), server ${11} (${12}), expected SMCD both: the policy leaked out of $ns"
    smcrun handshake status --netns /run/netns/$ns --json > /tmp/hn.st 2>&1 || fail "smcrun handshake status --netns: $(first "$(cat /tmp/hn.st)")"
    set -- $(jq -r '"\(.netns) \(.selected) \(.policy.selected) \(.policy.client_tcp)"' /tmp/hn.st)
    echo "k73-handshake-netns: status in $ns: netns $1 (inode $nsino), selected $2 (ours: $3), client SYNs without SMC $4"
    [ "$1" = "$nsino" ] && [ "$2" = "$there" ] && [ "$3" = true ] && [ "$4" -ge 1 ] ||
        fail "handshake status --netns /run/netns/$ns: $(tr '\n' ' ' < /tmp/hn.st | cut -c1-200), expected netns $nsino, $there selected, ≥ 1 client TCP decision"
    # the namespace named by a process in it, as `attach --netns PID` takes it
    smcrun handshake status --netns $inpid --json > /tmp/hn.stpid 2>&1 || fail "smcrun handshake status --netns $inpid (a process in $ns): $(first "$(cat /tmp/hn.stpid)")"
    set -- $(jq -r '"\(.netns) \(.policy.selected)"' /tmp/hn.stpid)
    [ "$1" = "$nsino" ] && [ "$2" = true ] || fail "handshake status --netns $inpid: netns $1, ours selected $2, expected $nsino, true"
    smcrun handshake status --json > /tmp/hn.sthere 2>&1 || fail "smcrun handshake status: $(first "$(cat /tmp/hn.sthere)")"
    set -- $(jq -r '"\(.netns) \(.policy != null)"' /tmp/hn.sthere)
    [ "$1" != "$nsino" ] && [ "$2" = false ] || fail "handshake status here: $(tr '\n' ' ' < /tmp/hn.sthere | cut -c1-200), expected this namespace with no policy of ours"
    o=$(smcrun handshake unload --netns /run/netns/$ns 2>&1) || fail "smcrun handshake unload --netns: $(first "$o")"
    there=$($IP netns exec $ns cat /proc/sys/net/smc/hs_ctrl)
    [ -z "$there" ] || fail "after handshake unload --netns, net.smc.hs_ctrl in $ns is '$there'"
    [ ! -e /sys/fs/bpf/smcrun-handshake/net-$nsino ] || fail "handshake unload --netns left its pins"
    cleanup_procs
    $IP netns del $ns
    ok
}

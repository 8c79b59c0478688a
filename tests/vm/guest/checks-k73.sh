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

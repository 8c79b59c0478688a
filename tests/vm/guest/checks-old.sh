# shellcheck shell=dash
# Checks of the older Debian kernels (`tests/vm/run --kernel 5.10`, `--kernel 6.1`), sourced by checks.sh.
# SMC-R over soft-RoCE does not work on these kernels (6.1: NOSMCDEV, and with a pnet entry a hang in
# smc_wr_drain_cq; 5.10: no SMC-Rv2, no UEIDs), so init sets up neither soft-RoCE nor a UEID and these
# checks prove the fallback path on a real SMC kernel: AF_SMC sockets made and their fallback reasons
# decoded, programs under smcrun behaving exactly as without it, and every view either answering from
# the older netlink or saying in ONE line what this kernel lacks and the Linux version that has it.
# Uses the plumbing of checks.sh (fail, ok, bg, ss_snap, redis_wait, ...).
#
# smcrun's JSON is read by vmcheck (tests/vm/check), one question a call.
#
# shellcheck disable=SC2015,SC2086,SC2154
# (SC2015: `[ a ] && [ b ] || fail` means "fail unless both"; SC2086: word lists split on purpose;
# SC2154: variables set by checks.sh and init.)

# What each kernel lacks, as smcrun says it (kernel/src/features.rs): the SMC generic netlink
# family came with 5.11, IPPROTO_SMC with 6.11, the socket() hook of BPF mode with 6.6.
OLD_GENL_LACK="has no SMC generic netlink family (SMC_GEN_NETLINK: system info, link groups, devices); Linux 5.11 added it"
OLD_INET_LACK="has no IPPROTO_SMC sockets (socket(AF_INET, SOCK_STREAM, IPPROTO_SMC)); Linux 6.11 added it"
CHECK_LIMIT_old_views=200
CHECK_LIMIT_old_ops=150
CHECK_LIMIT_old_demo=150
# old_has_genl: 0 when this kernel has the SMC generic netlink family
old_has_genl() { [ "$KERNEL" != 5.10 ]; }

# one_line OUT-FILE ERR-FILE RC WANT-RC WANT-TEXT WHAT: exactly one line on stderr containing
#   WANT-TEXT, exit WANT-RC, and on stdout nothing, or under --json/-j (in WHAT) the error object:
#   {"error": the same line, "exit_code": WANT-RC}
one_line() {
    local n
    [ "$3" = "$4" ] || fail "$6 exited $3, expected $4: $(first "$(cat "$2" "$1")")"
    n=$(grep -c . "$2")
    [ "$n" = 1 ] || fail "$6 printed $n lines on stderr, expected one: $(cat "$2" | tr '\n' '|' | cut -c1-300)"
    grep -qF -- "$5" "$2" || fail "$6 said \"$(first "$(cat "$2")")\", expected it to name \"$5\""
    case " $6 " in
    *" --json "* | *" -j "*)
        n=$(vmcheck error-object "$1" "$(cat "$2")" "$4") || fail "$6: $n (stdout: $(first "$(cat "$1")"))"
        ;;
    *) [ ! -s "$1" ] || fail "$6 printed on stdout too: $(first "$(cat "$1")")" ;;
    esac
}

# old-demo: smcrun demo over AF_SMC: every socket is SMC, fell back to TCP with the kernel's reason
# decoded (client NOSMCDEV: no SMC device; server PEERDECL with the client's NOSMCDEV as the peer's
# diagnosis), data intact; `smcrun ss` shows the same reasons for connections held open.
check_old_demo() {
    need_prog redis-server redis-benchmark redis-cli
    out=$(smcrun demo --json --connections 3 --bytes 64k 2> /tmp/od.err)
    rc=$?
    printf '%s\n' "$out" > /tmp/od.json
    cat /tmp/od.json /tmp/od.err
    [ $rc = 0 ] || fail "smcrun demo exited $rc: $(lastl "$(cat /tmp/od.err)")"
    # 3 connections intact, all 6 sockets TCP: clients NOSMCDEV, servers declined by them
    o=$(vmcheck demo-declined /tmp/od.json 3 "no SMC device found") || fail "$o (stderr: $(lastl "$(cat /tmp/od.err)"))"
    # the same reasons through sock_diag, for connections held open
    p=6390
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 300 ss-declined $p 2 0x03030000 NOSMCDEV 0x05000000) || fail "$o"
    echo "$o"
    # and `smcrun why` for the server: its connections TCP, the kernel's reason named. Its runtime
    # writes the report on its own beat, so until the report names it (10 s at most): once jq's
    # starts (3 s each under TCG) gave it the time, and a faster reader saw "0 connections".
    pid=$(pidof redis-server | cut -d' ' -f1)
    i=0
    w=$(smcrun why "$pid" 2>&1)
    while [ $i -lt 50 ] && case $w in *0x05000000*) false ;; *) true ;; esac; do
        sleep 0.2
        i=$((i + 1))
        w=$(smcrun why "$pid" 2>&1)
    done
    printf 'smcrun why %s:\n%s\n' "$pid" "$w"
    case $w in *0x05000000*) ;; *) fail "smcrun why $pid does not name the servers' fallback 0x05000000: $(first "$w")" ;; esac
    ok
}

# old-strict: what the mode and fallback options do on a kernel before IPPROTO_SMC and the socket() hook.
check_old_strict() {
    need_prog sockcheck
    # --mode inet --fallback strict: not started, one line naming IPPROTO_SMC and 6.11, exit 125
    smcrun --mode inet --fallback strict sockcheck identity > /tmp/os.out 2> /tmp/os.err
    one_line /tmp/os.out /tmp/os.err $? 125 "$OLD_INET_LACK" "smcrun --mode inet --fallback strict"
    # --mode inet: one warning line, the program runs over TCP
    smcrun --mode inet sockcheck identity > /tmp/os.out 2> /tmp/os.err
    rc=$?
    cat /tmp/os.out /tmp/os.err
    [ $rc = 0 ] && grep -q '^data_ok=true' /tmp/os.out || fail "smcrun --mode inet sockcheck identity: rc $rc, $(grep data_ok /tmp/os.out)"
    [ "$(grep -c . /tmp/os.err)" = 1 ] && grep -qF "$OLD_INET_LACK" /tmp/os.err ||
        fail "smcrun --mode inet warned: $(tr '\n' '|' < /tmp/os.err), expected one line naming IPPROTO_SMC and 6.11"
    grep -q '^client_raw_domain=2$' /tmp/os.out && grep -q '^client_raw_protocol=6$' /tmp/os.out ||
        fail "smcrun --mode inet: the client is not a plain TCP socket: $(grep client_raw /tmp/os.out | tr '\n' ' ')"
    # --mode auto --fallback strict: AF_SMC sockets are made (the kernel has AF_SMC), the handshake falls
    # back, the data goes through: strict is about refused sockets, not fallbacks
    smcrun --mode auto --fallback strict sockcheck identity > /tmp/os.out 2> /tmp/os.err
    rc=$?
    cat /tmp/os.out /tmp/os.err
    [ $rc = 0 ] && grep -q '^data_ok=true' /tmp/os.out || fail "smcrun --fallback strict sockcheck identity: rc $rc, $(first "$(cat /tmp/os.err)")"
    grep -q '^listener_raw_domain=43$' /tmp/os.out || fail "--mode auto made no AF_SMC listener: $(grep listener_raw_domain /tmp/os.out)"
    [ ! -s /tmp/os.err ] || fail "--mode auto printed: $(first "$(cat /tmp/os.err)")"
    # --bpf: refused before anything is attached, one line naming IPPROTO_SMC and 6.11, exit 125
    smcrun --bpf sockcheck identity > /tmp/os.out 2> /tmp/os.err
    one_line /tmp/os.out /tmp/os.err $? 125 "Linux 6.11" "smcrun --bpf"
    # --bpf=auto: the preload instead, data through
    smcrun --bpf=auto sockcheck identity > /tmp/os.out 2> /tmp/os.err
    rc=$?
    [ $rc = 0 ] && grep -q '^data_ok=true' /tmp/os.out || fail "smcrun --bpf=auto sockcheck identity: rc $rc, $(first "$(cat /tmp/os.err)")"
    ok
}

# old-redis: programs under smcrun behave exactly as without it: redis-benchmark's requests all done,
# a 1 MB value written under smcrun and read back without it (and the other way) byte for byte.
check_old_redis() {
    need_prog redis-server redis-benchmark redis-cli
    p=6391
    redis_bg $p
    out=$(smcrun redis-benchmark -p $p -t set,get -n 1000 -c 4 -q 2>&1 | tr '\r' '\n' | grep -E 'requests per second|rror')
    echo "$out"
    [ "$(echo "$out" | grep -c 'requests per second')" = 2 ] || fail "smcrun redis-benchmark: $(first "$out")"
    case $out in *rror*) fail "redis-benchmark reported errors: $(first "$out")" ;; esac
    cmds=$(redis-cli -p $p info commandstats 2>&1)
    sets=$(printf '%s\n' "$cmds" | sed -n 's/^cmdstat_set:calls=\([0-9]*\),.*/\1/p')
    gets=$(printf '%s\n' "$cmds" | sed -n 's/^cmdstat_get:calls=\([0-9]*\),.*/\1/p')
    [ "${sets:-0}" -ge 1000 ] && [ "${gets:-0}" -ge 1000 ] || fail "redis-server counted ${sets:-0} SET and ${gets:-0} GET calls, expected 1000 each: $(first "$cmds")"
    head -c 1048576 /dev/urandom | base64 -w0 > /tmp/or.val
    want=$(sha256sum < /tmp/or.val | cut -d' ' -f1)
    smcrun redis-cli -p $p -x set blob < /tmp/or.val > /dev/null || fail "smcrun redis-cli -x set failed"
    got=$(redis-cli -p $p --raw get blob | head -c "$(wc -c < /tmp/or.val)" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "1 MB written under smcrun, read without it: sha256 differs"
    redis-cli -p $p -x set blob2 < /tmp/or.val > /dev/null || fail "redis-cli -x set failed"
    got=$(smcrun redis-cli -p $p --raw get blob2 | head -c "$(wc -c < /tmp/or.val)" | sha256sum | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "1 MB written without smcrun, read under it: sha256 differs"
    # and the runtime saw the server's connections as TCP with the kernel's reason
    ps_out=$(smcrun ps 2>&1)
    echo "$ps_out"
    echo "$ps_out" | grep -q 'redis-server.*0x0' || fail "smcrun ps does not show redis-server with a fallback reason: $(first "$ps_out")"
    ok
}

# old_view CMD...: runs `smcrun CMD...`; on a kernel with the SMC generic netlink family it must answer
#   (exit 0, output), on 5.10 print the one line of what the kernel lacks and exit 125
old_view() {
    smcrun "$@" > /tmp/ov.out 2> /tmp/ov.err
    rc=$?
    printf 'smcrun %s: rc=%s\n' "$*" $rc
    head -n 12 /tmp/ov.out /tmp/ov.err
    if old_has_genl; then
        [ $rc = 0 ] || fail "smcrun $* exited $rc on $KERNEL: $(first "$(cat /tmp/ov.err)")"
        [ -s /tmp/ov.out ] || [ -s /tmp/ov.err ] || fail "smcrun $* printed nothing"
    else
        one_line /tmp/ov.out /tmp/ov.err $rc 125 "$OLD_GENL_LACK" "smcrun $*"
    fi
}

# old-views: each view on the older ABI. With the SMC generic netlink family (6.1) every one answers
# (stats with its counters, the UEID table writable); without it (5.10) each one that needs it says
# what the kernel lacks in one line, exit 125; sock_diag's views (ss) and the PNET table work on both.
check_old_views() {
    need_prog redis-server redis-benchmark
    for v in info "info --json" stats "stats --json" "stats -m smcd" linkgroup "linkgroup --json" link device "device --json" "ueid show" "monitor base --count 1"; do
        old_view $v
    done
    if old_has_genl; then
        # the counters are the older kernel's own: a demo's fallbacks show in them
        smcrun stats --json > /tmp/ov.s0 || fail "smcrun stats --json failed"
        smcrun demo --connections 2 --bytes 16k > /dev/null 2>&1 || fail "smcrun demo failed"
        smcrun stats --json > /tmp/ov.s1 || fail "smcrun stats --json failed"
        o=$(vmcheck stats-fell-back /tmp/ov.s0 /tmp/ov.s1 2 0x03030000) || fail "$o"
        o=$(smcrun ueid add OLD-TEST 2>&1) || fail "smcrun ueid add OLD-TEST: $(first "$o")"
        o=$(smcrun ueid show 2>&1)
        case $o in *OLD-TEST*) ;; *) fail "smcrun ueid show does not list OLD-TEST: $(first "$o")" ;; esac
        o=$(smcrun ueid del OLD-TEST 2>&1) || fail "smcrun ueid del OLD-TEST: $(first "$o")"
    else
        smcrun ueid add OLD-TEST > /tmp/ov.out 2> /tmp/ov.err
        one_line /tmp/ov.out /tmp/ov.err $? 125 "has no SMC generic netlink family" "smcrun ueid add"
    fi
    # sock_diag and the PNET table (its own generic netlink family, there since 4.11) on both
    for v in "ss -a" "pnet show" rdma; do
        o=$(smcrun $v 2>&1)
        rc=$?
        printf 'smcrun %s: rc=%s\n%s\n' "$v" $rc "$o"
        case $v in
        rdma) [ $rc -le 1 ] && [ "$(printf '%s\n' "$o" | grep -c .)" = 1 ] || fail "smcrun rdma (no RDMA device here): rc $rc, $(first "$o")" ;;
        *) [ $rc = 0 ] || fail "smcrun $v exited $rc: $(first "$o")" ;;
        esac
    done
    ok
}

# old-ops: the exporter and doctor on the older kernel. One scrape: smc_up 1 (SMC is there), no scrape
# error, the counters' collector 1 with the netlink statistics (6.1), 0 without (5.10); doctor: the
# same sentence for what the kernel lacks as the commands, its exit code equal to its JSON's.
check_old_ops() {
    m=$(smcrun metrics 2>&1)
    rc=$?
    printf '%s\n' "$m" | grep -E '^smc_up|^smcrun_scrape|^smc_fallback' | head -n 20
    [ $rc = 0 ] || fail "smcrun metrics exited $rc: $(first "$m")"
    printf '%s\n' "$m" | grep -qx 'smc_up 1' || fail "smcrun metrics: $(printf '%s\n' "$m" | grep '^smc_up' || echo 'no smc_up'), expected smc_up 1 (SMC is there)"
    printf '%s\n' "$m" | grep -qx 'smcrun_scrape_errors_total 0' || fail "smcrun metrics: $(printf '%s\n' "$m" | grep '^smcrun_scrape_errors_total')"
    want=0
    old_has_genl && want=1
    printf '%s\n' "$m" | grep -qx "smcrun_scrape_collector_success{collector=\"counters\"} $want" ||
        fail "smcrun metrics: $(printf '%s\n' "$m" | grep 'collector="counters"'), expected $want on $KERNEL"
    # the exporter serving it
    bg smcrun exporter > /tmp/oe.log 2>&1
    i=0
    until body=$(curl -sf http://127.0.0.1:9609/metrics); do
        i=$((i + 1))
        [ $i -gt 50 ] && fail "smcrun exporter did not serve /metrics: $(first "$(cat /tmp/oe.log)")"
        sleep 0.2
    done
    printf '%s\n' "$body" | grep -qx 'smc_up 1' || fail "the exporter's /metrics has no smc_up 1"
    # doctor
    smcrun doctor --json --bpf > /tmp/odr.json 2> /tmp/odr.err
    rc=$?
    smcrun doctor 2>&1 | head -n 30
    o=$(vmcheck doctor-passed /tmp/odr.json --exit $rc) || fail "$o"
    if old_has_genl; then
        o=$(vmcheck doctor-passed /tmp/odr.json sysctls) || fail "on $KERNEL: $o"
    else
        # smc-devices and smc-rv2 skipped: the kernel lacks SMC_GEN_NETLINK (5.11); sysctls: 5.19
        for id in smc-devices smc-rv2; do
            o=$(vmcheck doctor-says /tmp/odr.json $id "$OLD_GENL_LACK" --status skip) || fail "$o"
        done
        o=$(vmcheck doctor-says /tmp/odr.json sysctls "Linux 5.19 added it") || fail "$o"
    fi
    o=$(vmcheck doctor-says /tmp/odr.json bpf:kernel "Linux 6.11 added it") || fail "$o"
    ok
}

# old-agent: `smcrun agent --check` tells the truth here. 5.10: it cannot (smc is a module and 5.10
#   has no module BTF, 5.11 added it): exit 125 and one line naming 5.11, and the daemon itself
#   refuses the same way. 6.1: it can (missed probe runs not counted: 6.7), and the agent classifies
#   50 short connections of a native AF_SMC program (no shim) on both sides: TCP (SMC-R does not
#   work here, see above) with their fallback reasons, 0 "mode not seen", nothing lost.
CHECK_LIMIT_old_agent=200
check_old_agent() {
    local rc
    smcrun agent --check > /tmp/oag.out 2> /tmp/oag.err
    rc=$?
    cat /tmp/oag.out /tmp/oag.err
    if [ "$KERNEL" = 5.10 ]; then
        one_line /tmp/oag.out /tmp/oag.err $rc 125 "Linux 5.11" "smcrun agent --check"
        smcrun agent > /tmp/oag.out 2> /tmp/oag.err
        one_line /tmp/oag.out /tmp/oag.err $? 125 "Linux 5.11" "smcrun agent"
        ok
    fi
    [ $rc = 0 ] || fail "smcrun agent --check exited $rc on $KERNEL: $(first "$(cat /tmp/oag.err)")"
    grep -q 'missed probe runs not counted: Linux 6.7' /tmp/oag.out || fail "smcrun agent --check does not say 6.7 counts missed probe runs: $(first "$(cat /tmp/oag.out)")"
    need_prog shapes
    agent_up
    agent_pair oag 7221 50 tcp SHAPES_FAMILY=smc ""
    exec 4>&- 5>&-
    vmcheck agent-reasons || fail "the TCP connections: $(vmcheck agent-reasons)"
    agent_lost --missed-runs not-counted
    kill -TERM $AGENT_PID
    ok
}

# old-fixtures: `smcrun __capture` with fallen-back connections open (k5.10/ or k6.1/), for the host
# tests' replay of this kernel's replies.
check_old_fixtures() {
    need_prog redis-server redis-benchmark
    p=6379
    redis_bg $p
    smcrun redis-benchmark -p $p -t set,get -n 100 -c 2 -q > /dev/null 2>&1 || fail "redis-benchmark failed before the capture"
    bg smcrun redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
    bg redis-benchmark -p $p -I -c 1 > /tmp/idle2.log 2>&1
    o=$(vmcheck --wait 300 ss-port $p TCP 3 --served) || fail "the fallback connections did not show up in smcrun ss --json: $o"
    dir=k$KERNEL
    capture_phase "$dir"
    [ -s "/tmp/fx/$dir/sock_diag_ext0.bin" ] || fail "no sock_diag capture"
    if old_has_genl; then
        for w in smc_GET_SYS_INFO smc_GET_STATS smc_GET_FBACK_STATS smc_DUMP_UEID; do
            [ -s "/tmp/fx/$dir/$w.bin" ] || fail "no $w capture on $KERNEL"
        done
    else
        [ ! -e "/tmp/fx/$dir/smc_GET_SYS_INFO.bin" ] || fail "5.10 answered GET_SYS_INFO?"
    fi
    {
        echo "# Kernel $KERNEL: netlink replies captured in the VM test bed"
        echo
        echo "- Kernel: Debian \`linux-image-$(uname -r)\` ($(uname -v)), qemu TCG, 2 vCPUs (\`tests/vm/run --kernel $KERNEL --capture-fixtures\`)."
        echo "- Set-up: none (no soft-RoCE, no UEID: SMC-R over soft-RoCE does not work on this kernel)."
        echo "- smcrun: $(smcrun --version 2>&1 | head -n1), commit $SRC_REV."
        echo
        echo "After \`smcrun redis-server --port $p\` served \`smcrun redis-benchmark -t set,get -n 100 -c 2\`, with"
        echo "\`smcrun redis-benchmark -I -c 2\` (client 0x03030000 NOSMCDEV, server 0x05000000 PEERDECL) and a plain"
        echo "\`redis-benchmark -I -c 1\` (server 0x03010000 PEERNOSMC) holding fallen-back connections open: \`smcrun __capture $dir\`."
        old_has_genl || echo "This kernel has no SMC_GEN_NETLINK family (5.11 added it): only sock_diag, the PNET table and RDMA netlink answered."
        echo
        fx_list "$dir"
    } > "/tmp/fx/$dir/README.md"
    for f in $(cd "/tmp/fx/$dir" && ls); do
        send_file "fixtures/$dir/$f" "/tmp/fx/$dir/$f"
    done
    ok
}

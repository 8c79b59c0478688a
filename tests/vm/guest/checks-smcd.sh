# shellcheck shell=dash
# SMC-D checks of the VM test bed (`tests/vm/run --kernel smcd`), sourced by checks.sh: the project's own
# kernel with SMC-D loopback (loopback-ism), set up by init like the SMC-R suite (soft-RoCE on lo and the
# UEID SMCRUN-TEST), so every check also shows SMC-D chosen over SMC-R. SMC-Dv2 on x86 needs the UEID
# (the SEID is zero and disabled outside s390): SMCRUN_VM_BREAK=no-ueid makes these checks fail, each
# saying so. Uses the plumbing of checks.sh (fail, ok, bg, stats_snap, ...). smcrun's JSON is read by
# vmcheck (tests/vm/check) into the views' own types: the checks save the kernel's answers to files and
# ask vmcheck one question of each set.
#
# shellcheck disable=SC2015,SC2086,SC2154
# (SC2015: `[ a ] && [ b ] || fail` means "fail unless both"; SC2086: `set -- $v` splits on purpose;
# SC2154: variables set by checks.sh and init.)

# sd_ss RAW [SS-ARGS]: `smcrun ss [ARGS] --json` into RAW, unread
sd_ss() {
    local f _o
    f=$1
    shift
    _o=$(smcrun ss "$@" --json 2>&1 > "$f") || fail "smcrun ss $* --json failed: $(first "$_o")"
}

# smcd_why: what a failed SMC-D check should add about the set-up: SMC-Dv2 needs a UEID here.
smcd_why() {
    ueid_hint "SMC-Dv2 needs one on x86, where the SEID is disabled"
}

# loopback-ism's channel id (SMC_LO_RESERVED_CHID in the kernel's smc_loopback.h)
LO_CHID=65535

# smcd-demo: `smcrun demo` runs every connection over SMC-D (not SMC-R, though soft-RoCE is there too),
#   with intact data; the kernel's SMC-D successes grew by its connections on both sides, SMC-R's and the
#   fallback counters did not. Then redis over IPv6 (::1), which SMC-R cannot do on lo: SMC-D too.
check_smcd_demo() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    n=4
    stats_snap /tmp/sd.s0
    smcrun demo --json --connections $n --bytes 256k > /tmp/sd.json 2> /tmp/sd.err
    rc=$?
    stats_snap /tmp/sd.s1
    cat /tmp/sd.err
    [ "$(head -c1 /tmp/sd.json)" = "{" ] || fail "smcrun demo --json exited $rc without JSON: $(lastl "$(cat /tmp/sd.err)")"
    # connections, data, every socket SMC-D on loopback-ism with a link group
    o=$(vmcheck demo-smcd /tmp/sd.json $n) || fail "$o$(smcd_why)"
    echo "smcd-demo: $o"
    [ $rc = 0 ] || fail "smcrun demo exited $rc: $(lastl "$(cat /tmp/sd.err)")"
    o=$(vmcheck stats-smcd /tmp/sd.s0 /tmp/sd.s1 --client $n --server $n --smcr 0 --client-fallbacks 0 --server-fallbacks 0) ||
        fail "during an SMC-D demo of $n connections: $o"
    echo "smcd-demo: $o"
    smcrun demo --connections 1 --bytes 64k | tail -n 4

    # IPv6: redis on ::1 with one idle client: both ends SMCD in sock_diag (matched by port: the
    # addresses of IPPROTO_SMC sockets are filled in from TCP sock_diag)
    p=6479
    bg smcrun redis-server --port $p --bind ::1 --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait $p ::1
    bg smcrun redis-benchmark -h ::1 -p $p -I -c 1 > /tmp/idle.log 2>&1
    ss6=$(vmcheck --wait 200 ss-port $p SMCD 2) || fail "over ::1: $ss6$(smcd_why)"
    r=$(smcrun redis-cli -h ::1 -p $p set k6 v6 2>&1)
    [ "$r" = OK ] || fail "over ::1: redis-cli set gave '$(first "$r")'"
    echo "smcd-demo: ::1: $ss6"
    ok
}

# smcd-views: after a known `smcrun demo` (N connections, B bytes each way) and with K idle redis
#   connections open: stats -m smcd (text and JSON) grew by the demo's connections and bytes; ss -D shows
#   each SMC-D socket's DMB (tokens crossing between the two ends, loopback-ism's one GID on both, the
#   link group's id); linkgroup lists the SMC-D link groups (loopback-ism's CHID, SMC-Dv2, the EID,
#   as many connections as ss shows); device shows loopback-ism and says why the kernel's device dump
#   does not list it; info shows SMC-Dv2, the UEID and loopback-ism.
check_smcd_views() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    n=3 b=262144 k=3 p=6380
    stats_snap /tmp/sv.s0
    smcrun demo --connections $n --bytes $b > /tmp/sv.demo 2>&1
    rc=$?
    stats_snap /tmp/sv.s1
    [ $rc = 0 ] && grep -q 'every byte checked and intact' /tmp/sv.demo ||
        fail "smcrun demo --connections $n failed (rc $rc): $(lastl "$(cat /tmp/sv.demo)")"
    # $n connections, both ends; each byte is sent and received once by each end of each
    # connection: 2 * n * b at least, each way
    o=$(vmcheck stats-smcd /tmp/sv.s0 /tmp/sv.s1 --connections $((2 * n)) --min-bytes $((2 * n * b))) ||
        fail "stats --json after a demo of $n x $b B: $o$(smcd_why)"
    echo "smcd-views: demo $n x $b B: $o"
    # the text: SMC-D's layout with the JSON's numbers, and no SMC-R
    stats_snap /tmp/sv.s2
    smcrun stats -m smcd > /tmp/sv.txt 2>&1 || fail "smcrun stats -m smcd failed: $(first "$(cat /tmp/sv.txt)")"
    head -n 14 /tmp/sv.txt
    grep -q '^SMC-D Connections Summary' /tmp/sv.txt || fail "smcrun stats -m smcd has no SMC-D summary: $(first "$(cat /tmp/sv.txt)")"
    if grep -q 'SMC-R' /tmp/sv.txt; then fail "smcrun stats -m smcd shows SMC-R: $(grep -m1 'SMC-R' /tmp/sv.txt)"; fi
    shown=$(sed -n 's/^ *SMC connections[ .:]*\([0-9][0-9]*\)$/\1/p' /tmp/sv.txt | head -n1)
    [ -n "$shown" ] || fail "smcrun stats -m smcd shows no SMC connections line: $(first "$(cat /tmp/sv.txt)")"
    o=$(vmcheck stats-smcd-connections /tmp/sv.s2 "$shown") || fail "smcrun stats -m smcd shows $shown SMC connections, but $o"

    # K idle connections held open: ss -D
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c $k > /tmp/idle.log 2>&1
    o=$(vmcheck --wait 200 ss-port $p SMCD $((2 * k))) || fail "$o$(smcd_why)"
    sd_ss /tmp/sv.ssd -D
    smcrun ss -D > /tmp/sv.ssdt 2>&1 || fail "smcrun ss -D failed: $(first "$(cat /tmp/sv.ssdt)")"
    smcrun linkgroup --json > /tmp/sv.lg 2> /tmp/sv.lg.err || fail "smcrun linkgroup --json failed: $(first "$(cat /tmp/sv.lg.err)")"
    smcrun linkgroup > /tmp/sv.lgt 2>&1 || fail "smcrun linkgroup failed: $(first "$(cat /tmp/sv.lgt)")"
    sd_ss /tmp/sv.ss
    head -n 4 /tmp/sv.ssdt
    cat /tmp/sv.lgt
    # -D lists only SMC-D sockets, each ACTIVE one with its DMB (non-zero tokens, loopback-ism's one
    # GID on both ends, its token the peer token of exactly one other socket, its link group in
    # linkgroup --json); linkgroup's SMC-D groups with connections are on loopback-ism (CHID),
    # SMC-Dv2 with the EID, and count as many connections as ss shows. The line ends with a token.
    o=$(vmcheck smcd-dmbs /tmp/sv.ssd /tmp/sv.lg /tmp/sv.ss --min-active $((2 * k)) --chid $LO_CHID --eid SMCRUN-TEST) || fail "$o"
    echo "smcd-views: $o"
    token=${o##* }
    head -n1 /tmp/sv.ssdt | grep -q 'GID Token Peer-GID Peer-Token Linkid' || fail "smcrun ss -D header lacks the DMB columns: $(head -n1 /tmp/sv.ssdt)"
    grep -q " SMCD .*$token" /tmp/sv.ssdt || fail "smcrun ss -D does not show DMB token $token on an SMCD row"
    grep -q 'SMC-D link groups' /tmp/sv.lgt && grep -q ' loopback-ism ' /tmp/sv.lgt ||
        fail "smcrun linkgroup does not list an SMC-D link group on loopback-ism: $(tr '\n' ' ' < /tmp/sv.lgt | cut -c1-200)"

    # device and info: loopback-ism in use by those link groups, missing from the kernel's device dump
    smcrun device --json > /tmp/sv.dev || fail "smcrun device --json failed"
    smcrun device > /tmp/sv.devt 2>&1 || fail "smcrun device failed"
    smcrun info --json > /tmp/sv.info || fail "smcrun info --json failed"
    smcrun info > /tmp/sv.infot 2>&1 || fail "smcrun info failed"
    cat /tmp/sv.devt /tmp/sv.infot
    o=$(vmcheck device-loopback /tmp/sv.dev) || fail "smcrun device --json: $o"
    echo "smcd-views: device: $o"
    grep -q '^loopback-ism: in use' /tmp/sv.devt || fail "smcrun device does not show loopback-ism in use: $(tr '\n' ' ' < /tmp/sv.devt | cut -c1-200)"
    grep -q "not in the kernel's SMC-D device dump" /tmp/sv.devt || fail "smcrun device does not say why loopback-ism is missing from the kernel's device dump"
    o=$(vmcheck info-smcd /tmp/sv.info SMCRUN-TEST) || fail "smcrun info --json: $o$(smcd_why)"
    echo "smcd-views: info: $o"
    grep -q '^SMC-D .*v2 Yes (loopback-ism' /tmp/sv.infot || fail "smcrun info does not show SMC-Dv2 on loopback-ism: $(grep '^SMC-D' /tmp/sv.infot)"
    ok
}

# smcd-monitor: while redis-benchmark moves data over SMC-D, `smcrun monitor base -m smcd` shows non-zero
#   rates, connections and buffers, and `-m smcr` (soft-RoCE is idle) shows no connection and no rate.
check_smcd_monitor() {
    need_setup
    need_prog redis-server redis-benchmark
    p=6381
    redis_bg $p
    bg smcrun redis-benchmark -p $p -t set -d 4096 -n 10000000 -c 2 -q > /dev/null 2>&1
    sleep 1
    smcrun monitor base -m smcd -i 1 --count 3 --json > /tmp/sm.mon 2> /tmp/sm.err || fail "smcrun monitor base -m smcd --json failed: $(first "$(cat /tmp/sm.err)")"
    smcrun monitor base -m smcr -i 1 --count 1 --json > /tmp/sm.monr 2>&1 || fail "smcrun monitor base -m smcr --json failed: $(first "$(cat /tmp/sm.monr)")"
    smcrun monitor base -m smcd -i 1 --count 2
    cat /tmp/sm.mon /tmp/sm.monr
    o=$(vmcheck monitor-busy /tmp/sm.mon 3 --mode smcd) || fail "smcrun monitor base -m smcd --count 3 while redis-benchmark ran: $o$(smcd_why)"
    echo "smcd-monitor: -m smcd: $o"
    o=$(vmcheck monitor-idle /tmp/sm.monr smcr) || fail "smcrun monitor base -m smcr counts the SMC-D traffic: $o"
    echo "smcd-monitor: -m smcr: $o"
    ok
}

# smcd-policy: with --policy 'smc port 6379; tcp' a client to 6379 runs SMC-D and one to 6380 (an SMC
#   server too) runs TCP, data intact either way: the kernel counts one SMC-D client success for the
#   first, none for the second, whose server side falls back with 0x03010000 (the client offered no SMC).
check_smcd_policy() {
    need_setup
    need_prog sockcheck
    pol='smc port 6379; tcp'
    bg smcrun sockcheck serve 6379 > /tmp/s6379.log 2>&1
    bg smcrun sockcheck serve 6380 > /tmp/s6380.log 2>&1
    sleep 1
    for port in 6379 6380; do
        stats_snap /tmp/sp.s0.$port
        bg smcrun --policy "$pol" sockcheck client 127.0.0.1:$port 100000 3000 > /tmp/sp.$port 2>&1
        cpid=$(tail -n1 /tmp/check.pids)
        # the client holds its connection 3 s: snapshots until one shows it, while the client runs
        # (a cheap look in the loop; a loaded host can take seconds to start it)
        rm -f /tmp/sp.ss.$port
        until grep -q "\"peer\": \"127.0.0.1:$port\"" /tmp/sp.ss.$port 2> /dev/null; do
            kill -0 "$cpid" 2> /dev/null || break
            sleep 0.1
            sd_ss /tmp/sp.ss.$port -a
        done
        wait "$cpid"
        crc=$?
        stats_snap /tmp/sp.s1.$port
        cat /tmp/sp.$port
        [ $crc = 0 ] && grep -q '^echo_ok=true' /tmp/sp.$port || fail "client to $port under '$pol' (rc $crc): data not intact: $(first "$(cat /tmp/sp.$port)")"
    done
    o=$(vmcheck ss-saved-end /tmp/sp.ss.6379 client 6379 SMCD) || fail "client to 6379 under '$pol' in sock_diag: $o$(smcd_why)"
    echo "smcd-policy: $o"
    o=$(vmcheck stats-smcd /tmp/sp.s0.6379 /tmp/sp.s1.6379 --client 1) || fail "the connection to 6379: $o"
    echo "smcd-policy: 6379: $o"
    # the client's socket became TCP before connecting: no active SMC client socket in the dump
    o=$(vmcheck ss-saved-end /tmp/sp.ss.6380 client 6380 SMCD --not) || fail "client to 6380 under '$pol' runs SMC-D: $o"
    echo "smcd-policy: $o"
    # not an SMC-D client success; the server falls back with 0x03010000 (peer offered no SMC)
    o=$(vmcheck stats-smcd /tmp/sp.s0.6380 /tmp/sp.s1.6380 --client 0 --server-peernosmc 1) || fail "the TCP-by-policy connection to 6380: $o"
    echo "smcd-policy: 6380: $o"
    ok
}

# smcd-fallback: SMC-D's own fallback reasons, decoded by ss and counted by stats, with the data intact:
#   no UEID (SMC-Dv2 cannot be offered: the server says NOUEID, the client sees its decline), a plain
#   server, a plain client.
check_smcd_fallback() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    without_ueid fallback_case no-ueid smcrun smcrun 127.0.0.1 6390 127.0.0.1 '0x05000000/0x03030008 PEERDECL/NOUEID' '0x03030008 NOUEID'
    fallback_case plain-server plain smcrun 127.0.0.1 6392 127.0.0.1 '0x03010000 PEERNOSMC' -
    fallback_case plain-client smcrun plain 127.0.0.1 6393 127.0.0.1 - '0x03010000 PEERNOSMC'
    ok
}

# smcd-containers: two network namespaces joined by a veth pair (the shape of two pods on one node), a
#   server in one and a client in the other, both under smcrun, over the veth addresses: SMC-D through
#   loopback-ism (the kernel's one UEID table serves both), data intact, each namespace counting its
#   own end in its own statistics.
IP=/opt/iproute2/ip
# smcd_pods [c]: the network namespaces smcd-a (10.6.0.1) and smcd-b (10.6.0.2) joined by a veth pair,
#   and with `c` a third, smcd-c (10.7.0.2), joined to smcd-a (10.7.0.1) by another; ina/inb/inc run a
#   command in one
smcd_pods() {
    local ns o
    [ -x $IP ] || fail "$IP (iproute2) is not in the guest"
    mkdir -p /var/run
    for ns in smcd-a smcd-b ${1:+smcd-c}; do
        $IP netns del $ns 2> /dev/null
        o=$($IP netns add $ns 2>&1) || fail "ip netns add $ns: $(first "$o")"
    done
    o=$($IP link add va netns smcd-a type veth peer name vb netns smcd-b 2>&1) || fail "ip link add veth: $(first "$o")"
    $IP -n smcd-a addr add 10.6.0.1/24 dev va && $IP -n smcd-a link set va up && $IP -n smcd-a link set lo up &&
        $IP -n smcd-b addr add 10.6.0.2/24 dev vb && $IP -n smcd-b link set vb up && $IP -n smcd-b link set lo up ||
        fail "setting up the veth addresses failed"
    if [ -n "${1:-}" ]; then
        o=$($IP link add vac netns smcd-a type veth peer name vc netns smcd-c 2>&1) || fail "ip link add veth (smcd-c): $(first "$o")"
        $IP -n smcd-a addr add 10.7.0.1/24 dev vac && $IP -n smcd-a link set vac up &&
            $IP -n smcd-c addr add 10.7.0.2/24 dev vc && $IP -n smcd-c link set vc up && $IP -n smcd-c link set lo up ||
            fail "setting up the smcd-c veth addresses failed"
    fi
}
ina() { $IP netns exec smcd-a "$@"; }
inb() { $IP netns exec smcd-b "$@"; }
inc() { $IP netns exec smcd-c "$@"; }
check_smcd_containers() {
    need_setup
    need_prog sockcheck
    smcd_pods
    ina smcrun stats --json > /tmp/sc.a0 || fail "smcrun stats in namespace smcd-a failed"
    inb smcrun stats --json > /tmp/sc.b0 || fail "smcrun stats in namespace smcd-b failed"
    bg $IP netns exec smcd-a smcrun sockcheck serve 7000 0.0.0.0 > /tmp/sc.srv 2>&1
    sleep 1
    bg $IP netns exec smcd-b smcrun sockcheck client 10.6.0.1:7000 200000 4000 > /tmp/sc.cli 2>&1
    cpid=$(tail -n1 /tmp/check.pids)
    # snapshots of each end until both show the connection, while the client runs (a cheap look)
    rm -f /tmp/sc.ssa /tmp/sc.ssb
    until { grep -q '"peer": "10.6.0.2:' /tmp/sc.ssa && grep -q '"peer": "10.6.0.1:7000"' /tmp/sc.ssb; } 2> /dev/null; do
        kill -0 "$cpid" 2> /dev/null || break
        sleep 0.1
        ina smcrun ss -a --json > /tmp/sc.ssa 2>&1
        inb smcrun ss -a --json > /tmp/sc.ssb 2>&1
    done
    wait "$cpid"
    crc=$?
    cat /tmp/sc.cli /tmp/sc.srv
    ina smcrun stats --json > /tmp/sc.a1 || fail "smcrun stats in namespace smcd-a failed"
    inb smcrun stats --json > /tmp/sc.b1 || fail "smcrun stats in namespace smcd-b failed"
    [ $crc = 0 ] && grep -q '^echo_ok=true' /tmp/sc.cli || fail "client in smcd-b to 10.6.0.1:7000: data not intact (rc $crc): $(first "$(cat /tmp/sc.cli)")"
    a=$(vmcheck ss-saved-end /tmp/sc.ssa server 7000 SMCD)
    ra=$?
    b=$(vmcheck ss-saved-end /tmp/sc.ssb client 7000 SMCD)
    rb=$?
    echo "smcd-containers: smcd-a: $a; smcd-b: $b"
    [ $ra = 0 ] && [ $rb = 0 ] || fail "across namespaces, expected SMCD at both ends: smcd-a: $a; smcd-b: $b$(smcd_why)"
    a=$(vmcheck stats-smcd /tmp/sc.a0 /tmp/sc.a1 --server 1 --client 0) || fail "per-namespace SMC-D successes, in smcd-a (the server's): $a"
    b=$(vmcheck stats-smcd /tmp/sc.b0 /tmp/sc.b1 --client 1) || fail "per-namespace SMC-D successes, in smcd-b (the client's): $b"
    echo "smcd-containers: smcd-a $a; smcd-b $b"
    $IP netns del smcd-a
    $IP netns del smcd-b
    ok
}

# smcd-fixtures: the kernel's raw replies with SMC-D connections open (smcd/), and after SMC-D's fallbacks
#   (smcd-fallback/: no UEID, a plain client), sent to the host (tests/vm/run --kernel smcd --capture-fixtures).
SMCD_FX_WANT="smc_GET_SYS_INFO smc_GET_STATS smc_GET_FBACK_STATS smc_GET_LGR_SMCD smc_GET_DEV_SMCD smc_DUMP_UEID
 smc_DUMP_SEID sock_diag_ext0 sock_diag_ext1 sock_diag_ext8 sock_diag_ext15"
check_smcd_fixtures() {
    need_setup
    need_prog redis-server redis-benchmark
    # shellcheck disable=SC2034 # read by fx_expect (checks.sh)
    FX_WANT=$SMCD_FX_WANT
    # fallbacks: no UEID (server NOUEID, client PEERDECL) and a plain client (PEERNOSMC)
    fx_scenario SMCD smcd smcd-fallback "smc_GET_LGR_SMCD:20 sock_diag_ext0:20 sock_diag_ext8:20 smc_DUMP_UEID:20" \
        "smc_GET_FBACK_STATS:20 sock_diag_ext0:20"
    {
        echo "# SMC-D captures"
        echo
        echo "Raw replies of the VM test bed's SMC-D kernel (\`tests/vm/run --kernel smcd --capture-fixtures\`"
        echo "replaces smcd/ and smcd-fallback/ and this file, and leaves the SMC-R captures alone)."
        echo
        echo "- Kernel: the project's own \`$(uname -r)\` ($(uname -v)): Debian's linux-source-6.12, tinyconfig +"
        echo "  tests/vm/kernel-smcd.config, SMC-D loopback (loopback-ism) built in; qemu TCG, 2 vCPUs."
        echo "- Set-up: \`smcrun setup soft-roce --netdev lo --name rxe_lo\`, \`smcrun ueid add SMCRUN-TEST\`:"
        echo "  SMC-Dv2 over loopback-ism on 127.0.0.1 (chosen over SMC-R, which soft-RoCE offers too)."
        echo "- smcrun: $(smcrun --version 2>&1 | head -n1), commit $SRC_REV."
        echo "- 6.12 leaves loopback-ism out of its SMC-D device dump: smc_GET_DEV_SMCD holds only NLMSG_DONE."
        echo
        echo "## smcd/"
        echo
        echo "After \`smcrun redis-server --port 6379\` served \`smcrun redis-benchmark -t set,get -n 200 -c 2\`, with"
        echo "\`smcrun redis-benchmark -I -c 2\` holding 2 SMC-D connections open (4 active SMCD sockets):"
        echo "\`smcrun __capture smcd\`."
        echo
        fx_list smcd
        echo
        echo "## smcd-fallback/"
        echo
        echo "Then \`smcrun ueid del SMCRUN-TEST\`, a new \`smcrun redis-server --port 6379\` with one idle"
        echo "\`smcrun redis-benchmark -I -c 1\` connection (no UEID: server 0x03030008 NOUEID, client 0x05000000"
        echo "PEERDECL) and one plain \`redis-benchmark -I -c 1\` connection (server 0x03010000 PEERNOSMC), all open:"
        echo "\`smcrun __capture smcd-fallback\`. The statistics still hold the SMC-D traffic of smcd/."
        echo
        fx_list smcd-fallback
    } > /tmp/fx.smcd.README.md
    mv /tmp/fx.smcd.README.md /tmp/fx/smcd/README.md
    fx_send smcd-fixtures
    ok
}

# Later, from the owners of those parts (not here yet): the per-process runtime on SMC-D (`smcrun ps`,
# `smcrun why`, the exit report), BPF mode on this kernel (it has BTF, fmod_ret and tracing built in), the
# exporter's SMC-D series, and doctor on an SMC-D-capable kernel.

# smcd-runtime: the runtime on SMC-D. The demo's own exit report counts its 4 connections SMC-D
#   (classified while open, none left "not classified"); 300 short connections (connect, a byte each
#   way, close at once) with both sides under smcrun: both exit reports count exactly 300, none TCP,
#   the SMC-D ones whose mode was read while open and those only seen as SMC at close add up; a held
#   connection's server shows SMC-D in `smcrun ps` and `smcrun why`.
check_smcd_runtime() {
    need_setup
    need_prog shapes
    out=$(SMCRUN_REPORT=1 smcrun demo --connections 2 --bytes 64k 2>&1 > /dev/null)
    line=$(printf '%s\n' "$out" | grep '^smcrun: pid [0-9]* smcrun: ')
    echo "demo: $line"
    case $line in
    *": 4 connections, 0 SMC-R, 4 SMC-D, 0 TCP") ;;
    *) fail "the demo's exit report does not count its 4 connections SMC-D: ${line:-$(lastl "$out")}" ;;
    esac
    SMCRUN_REPORT=1 smcrun shapes serve-n 7202 300 > /tmp/sr.srv 2>&1 &
    spid=$!
    echo $spid >> /tmp/check.pids
    i=0
    while ! grep -q '^listening=' /tmp/sr.srv && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    out=$(SMCRUN_REPORT=1 smcrun shapes hammer 127.0.0.1:7202 300 8 2>&1)
    wait $spid
    printf '%s\n' "$out" | grep -q '^made=300 failed=0' || fail "the clients: $(first "$out")"
    for side in "$out" "$(cat /tmp/sr.srv)"; do
        line=$(printf '%s\n' "$side" | grep '^smcrun: pid [0-9]* shapes: ')
        echo "short: $line"
        case $line in *": 300 connections, 0 SMC-R, "*" 0 TCP"*) ;; *) fail "a side does not count exactly 300 connections, none TCP: $line" ;; esac
        d=$(printf '%s\n' "$line" | sed -n 's/.* \([0-9]*\) SMC-D.*/\1/p')
        u=$(printf '%s\n' "$line" | sed -n 's/.* \([0-9]*\) SMC (mode not seen).*/\1/p')
        [ $((${d:-0} + ${u:-0})) = 300 ] || fail "SMC-D ($d) and SMC with mode not seen ($u) do not add up to 300: $line"
    done
    bg smcrun shapes drop-root 7203 0 1 > /tmp/sr.held 2>&1
    held=$(tail -n1 /tmp/check.pids)
    i=0
    while ! grep -q '^listening=' /tmp/sr.held && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    out=$(smcrun shapes hammer 127.0.0.1:7203 1 1 1500 2>&1)
    [ "$out" = "made=1 failed=0" ] || fail "the held connection: $(first "$out")"
    list=$(vmcheck --wait 200 ps-smcd $held 1) || fail "smcrun ps does not show the server's SMC-D connection: $(echo $list | cut -c1-300)"
    echo "ps: $list"
    pid=$held
    why=$(smcrun why "$pid" 2>&1) || fail "smcrun why $pid: $(first "$why")"
    printf '%s\n' "$why" | grep -q '^server .* SMC-D ' || fail "smcrun why $pid lists no SMC-D connection: $(first "$why")"
    ok
}

# smcd-bpf: BPF mode on SMC-D: a statically linked server and 2 clients under smcrun --bpf run over
#   SMC-D (smc_diag SMCD, the SMC-D counters grew, no fallback), nothing attached afterwards.
check_smcd_bpf() {
    need_setup
    need_prog sechod
    bpf_setup
    BPF_MODE=SMCD bpf_echo_pair bsmcd 7204 2 "sechod server 127.0.0.1 7204 2" "sechod client 127.0.0.1 7204 65536 stdin"
    ok
}

# smcd-netns: BPF mode scoped by network namespace (a pod's) on programs already running, with no
#   preload: smcd-a attached by its file, smcd-b by the PID of a `sechod dial` already running there.
#   A TCP connection from smcd-b opened before the attach stays TCP (not in smc_diag, still echoing
#   after the attach); new sockets in both are SMC-D (protocol 256, smc_diag SMCD, each namespace's
#   SMC-D counters +2, no fallback) and `attach --list` counts them per namespace (smcd-a: the
#   server's listener, smcd-b: two clients); smcd-c, not attached, stays TCP (its client protocol 6,
#   the server in smcd-a counts a PEERNOSMC fallback); `ps --all` in smcd-b names the client's
#   netns scope, the metrics count both; after `detach --netns` (by path, for the one attached by
#   PID) smcd-b's next socket is TCP again, and after the last one nothing is pinned.
check_smcd_netns() {
    local p0=7300 p=7301 o l d nsb
    need_setup
    need_prog sechod
    bpf_setup
    smcd_pods c
    # before any attach: a plain TCP server in smcd-a, a client in smcd-b holding its connection,
    # and a dialer in smcd-b that connects only when asked
    old_connection sn 7 "$IP netns exec smcd-a sechod server 10.6.0.1 $p0 1" "exec $IP netns exec smcd-b sechod client 10.6.0.1 $p0 65536 again"
    rm -f /tmp/sn.new.in /tmp/sn.in /tmp/sn.out
    mkfifo /tmp/sn.new.in /tmp/sn.in
    # (each process started from here on is given none of the fifos' write ends, which it would keep
    # open: the smcrun attach's holder lives until the last detach)
    track sh -c "exec $IP netns exec smcd-b sechod dial 10.6.0.1 $p 65536 < /tmp/sn.in > /tmp/sn.out 2>&1" 7>&-
    d=$(tail -n1 /tmp/check.pids)
    exec 8> /tmp/sn.in
    nsb=$(inb readlink /proc/self/ns/net)
    i=0
    while [ "$(readlink /proc/$d/ns/net 2> /dev/null)" != "$nsb" ]; do
        [ $i -ge 100 ] && fail "the dialer (pid $d) did not enter smcd-b ($nsb): $(readlink /proc/$d/ns/net)"
        sleep 0.1
        i=$((i + 1))
    done
    # attach: smcd-a by its file, smcd-b by the dialer's PID
    o=$(smcrun attach --netns /run/netns/smcd-a 2>&1) || fail "smcrun attach --netns /run/netns/smcd-a: $(first "$o")"
    echo "$o"
    o=$(smcrun attach --netns "$d" 2>&1) || fail "smcrun attach --netns $d (the dialer in smcd-b): $(first "$o")"
    echo "$o"
    case $o in "/proc/$d/ns/net: attached (network namespace net:["*"]): its new TCP sockets are SMC sockets"*) ;; *) fail "attach --netns $d said: $o" ;; esac
    o=$(smcrun attach --netns /run/netns/smcd-a --cgroup $CG 2>&1) && fail "--netns with --cgroup was accepted: $o"
    ina smcrun stats --json > /tmp/sn.a0 && inb smcrun stats --json > /tmp/sn.b0 && inc smcrun stats --json > /tmp/sn.c0 ||
        fail "smcrun stats in a namespace failed"
    # the server in smcd-a starts after the attach: its listener is SMC
    track $IP netns exec smcd-a sechod server 0.0.0.0 $p 4 > /tmp/sn.srv 2>&1 7>&- 8>&-
    wait_for /tmp/sn.srv listening 300 || fail "the server in smcd-a did not listen: $(first "$(cat /tmp/sn.srv)")"
    l=$(dial sn 8 1)
    echo "smcd-b, the running dialer after attach: $l"
    [ "$l" = "ok 65536 proto=256" ] || fail "the running dialer in smcd-b after attach: expected IPPROTO_SMC (proto=256), got: $l"
    track sh -c "exec $IP netns exec smcd-b sechod client 10.6.0.1 $p 65536 stdin < /tmp/sn.new.in > /tmp/sn.new 2>&1" 7>&- 8>&-
    exec 9> /tmp/sn.new.in
    wait_for /tmp/sn.new '^ok ' 300 || fail "the new client in smcd-b: $(first "$(cat /tmp/sn.new)")"
    l=$(head -n1 /tmp/sn.new)
    echo "smcd-b, a new client held open: $l"
    [ "$l" = "ok 65536 proto=256" ] || fail "a new client in smcd-b: expected IPPROTO_SMC (proto=256), got: $l"
    # both connections open: smc_diag of smcd-b lists the new one SMC-D and not the old one, which
    # the kernel's TCP table still holds established (state 01, remote port 7300 = 0x1C84)
    inb smcrun ss -a --json > /tmp/sn.ssb 2>&1 || fail "smcrun ss in smcd-b: $(first "$(cat /tmp/sn.ssb)")"
    inb cat /proc/net/tcp > /tmp/sn.tcpb
    grep -Eq '^ *[0-9]+: [0-9A-F]+:[0-9A-F]+ 0100060A:1C84 01 ' /tmp/sn.tcpb || fail "the old connection is not an established TCP connection in smcd-b: $(grep 1C84 /tmp/sn.tcpb)"
    # (nsenter, not `ip netns exec`: that one mounts a sysfs of its own, without /sys/fs/bpf and its pins)
    nsenter --net=/run/netns/smcd-b smcrun ps --all --json > /tmp/sn.ps 2>&1 || fail "smcrun ps --all in smcd-b: $(first "$(cat /tmp/sn.ps)")"
    l=$(inc sechod client 10.7.0.1 $p 65536 2>&1)
    echo "smcd-c (not attached): $l"
    [ "$l" = "ok 65536 proto=6" ] || fail "smcd-c, not attached: expected TCP (proto=6), got: $l"
    ina smcrun stats --json > /tmp/sn.a1 && inb smcrun stats --json > /tmp/sn.b1 && inc smcrun stats --json > /tmp/sn.c1 ||
        fail "smcrun stats in a namespace failed"
    o=$(smcrun attach --list --json 2>&1 > /tmp/sn.list) || fail "smcrun attach --list --json failed: $(first "$o")"
    smcrun attach --list
    smcrun metrics > /tmp/sn.metrics 2>&1 || fail "smcrun metrics: $(first "$(cat /tmp/sn.metrics)")"
    o=$(vmcheck ss-saved-end /tmp/sn.ssb client $p SMCD) || fail "smc_diag in smcd-b: $o$(smcd_why)"
    echo "smcd-b: $o"
    o=$(vmcheck ss-untouched /tmp/sn.ssb $p0) || fail "smc_diag in smcd-b: the old TCP connection (port $p0) was touched: $o"
    o=$(vmcheck bpf-netns /tmp/sn.list "/proc/$d/ns/net:2:0:sechod" "/run/netns/smcd-a:1:0:sechod") ||
        fail "$o; expected smcd-b (by pid) 2 sockets, smcd-a 1 (the listener), all by sechod"
    echo "attach --list: $o"
    o=$(vmcheck bpf-ps-netns /tmp/sn.ps sechod "netns /proc/$d/ns/net" 2) || fail "ps --all in smcd-b: $o"
    echo "ps --all: $o"
    # SMC-D +2 in smcd-a and smcd-b (as attach --list counts), smcd-c's one connection a PEERNOSMC
    # fallback in smcd-a, nothing else
    o=$(vmcheck stats-smcd /tmp/sn.a0 /tmp/sn.a1 --server 2 --server-peernosmc 1 --client-fallbacks 0) || fail "counters in smcd-a: $o"
    echo "smcd-a: $o"
    o=$(vmcheck stats-smcd /tmp/sn.b0 /tmp/sn.b1 --client 2 --client-fallbacks 0 --server-fallbacks 0) || fail "counters in smcd-b: $o"
    echo "smcd-b: $o"
    o=$(vmcheck stats-smcd /tmp/sn.c0 /tmp/sn.c1 --client 0) || fail "counters in smcd-c: $o"
    echo "smcd-c: $o"
    grep -q '^smcrun_bpf_sockets_converted_total{scope="netns /run/netns/smcd-a"} 1$' /tmp/sn.metrics &&
        grep -q "^smcrun_bpf_sockets_converted_total{scope=\"netns /proc/$d/ns/net\"} 2\$" /tmp/sn.metrics ||
        fail "smcrun metrics lacks the netns scopes' counts: $(grep smcrun_bpf_sockets_converted /tmp/sn.metrics)"
    # detach smcd-b by its file (it was attached by PID): its next socket is TCP again
    o=$(smcrun detach --netns /run/netns/smcd-b 2>&1) || fail "smcrun detach --netns /run/netns/smcd-b: $(first "$o")"
    echo "$o"
    case $o in *"2 sockets made SMC"*) ;; *) fail "detach said: $o" ;; esac
    case $o in *"nothing is attached any more"*) fail "detaching smcd-b detached everything: $o" ;; esac
    l=$(dial sn 8 2)
    echo "smcd-b after detach: $l"
    [ "$l" = "ok 65536 proto=6" ] || fail "after detach: expected TCP (proto=6), got: $l"
    o=$(smcrun detach --netns "$d" 2>&1) && fail "a second detach of smcd-b succeeded: $o"
    echo "second detach: $o"
    # the old connection still echoes, still TCP
    exec 7>&- 9>&-
    old_again sn
    o=$(smcrun detach --netns /run/netns/smcd-a 2>&1) || fail "smcrun detach --netns /run/netns/smcd-a: $(first "$o")"
    echo "$o"
    case $o in *"nothing is attached any more"*) ;; *) fail "the last detach said: $o" ;; esac
    exec 8>&-
    nothing_attached
    $IP netns del smcd-a
    $IP netns del smcd-b
    $IP netns del smcd-c
    ok
}

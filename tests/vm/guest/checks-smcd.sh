# shellcheck shell=dash
# SMC-D checks of the VM test bed (`tests/vm/run --kernel smcd`), sourced by checks.sh: the project's own
# kernel with SMC-D loopback (loopback-ism), set up by init like the SMC-R suite (soft-RoCE on lo and the
# UEID SMCRUN-TEST), so every check also shows SMC-D chosen over SMC-R. SMC-Dv2 on x86 needs the UEID
# (the SEID is zero and disabled outside s390): SMCRUN_VM_BREAK=no-ueid makes these checks fail, each
# saying so. Uses the plumbing of checks.sh (fail, ok, bg, stats_snap, ss_snap, ss_wait, ...).
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2154
# (SC2015: `[ a ] && [ b ] || fail` means "fail unless both"; SC2086: `set -- $v` splits on purpose;
# SC2016: jq programs in single quotes; SC2154: variables set by checks.sh and init.)

# Every jq start costs about 3 s under TCG (jq 1.6 compiles its builtins first), so these checks save
# the kernel's answers to files and read each set with one jq.

# The SMC-D counters of a `smcrun stats --json` snapshot (stats_snap), like STATS_JQ for SMC-R.
SMCD_STATS_JQ='
def req(f): (f) as $v | if $v == null then error("smcrun stats --json lacks a counter these checks read (see SMCD_STATS_JQ)") else $v end;
def smcd: {
  clnt_succ: (req(.smcd.clnt_v1_succ_cnt) + req(.smcd.clnt_v2_succ_cnt)),
  srv_succ: (req(.smcd.srv_v1_succ_cnt) + req(.smcd.srv_v2_succ_cnt)),
  smcr_succ: req(.smcr.succ_cnt),
  clnt_fback: req(.fallback.clnt_cnt),
  srv_fback: req(.fallback.srv_cnt),
  srv_peernosmc: ([.fallback.srv_reasons[] | select(.hex == "0x03010000") | .count] | add // 0),
  rx_bytes: req(.smcd.rx.bytes),
  tx_bytes: req(.smcd.tx.bytes),
  conns: req(.smcd.summary.smc_connections)
};'
SMCD_KEYS="clnt_succ srv_succ smcr_succ clnt_fback srv_fback srv_peernosmc rx_bytes tx_bytes conns"
# smcd_deltas BEFORE AFTER: DELTAS = the growth of each of SMCD_KEYS between two snapshots, in that
#   order (one jq; called directly, not in $(...), so that its fail ends the check)
smcd_deltas() {
    DELTAS=$(jq -n -r --slurpfile a "$1" --slurpfile b "$2" --arg keys "$SMCD_KEYS" "$SMCD_STATS_JQ"'
        ($a[0] | smcd) as $x | ($b[0] | smcd) as $y | [$keys | split(" ")[] | $y[.] - $x[.]] | map(tostring) | join(" ")' 2>&1) ||
        fail "cannot read smcrun stats --json: $(first "$DELTAS")"
}

# sd_ss RAW [SS-ARGS]: `smcrun ss [ARGS] --json` into RAW, unread
sd_ss() {
    local f _o
    f=$1
    shift
    _o=$(smcrun ss "$@" --json 2>&1 > "$f") || fail "smcrun ss $* --json failed: $(first "$_o")"
}
# sd_wait RAW FILTER N SECONDS [SS-ARGS]: `smcrun ss --json` into RAW until N sockets match FILTER (over
#   SS_JQ's normalised fields), for at most SECONDS; one jq a round
sd_wait() {
    local f filt want end n
    f=$1 filt=$2 want=$3 end=$(($(date +%s) + $4))
    shift 4
    while :; do
        sd_ss "$f" "$@"
        n=$(jq "[$SS_JQ] | map(select($filt)) | length" "$f" 2>&1) || fail "cannot read smcrun ss --json: $(first "$n")"
        [ "$n" -ge "$want" ] && return 0
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.2
    done
}
# sd_show RAW FILTER: the matching sockets of a raw snapshot, for messages
sd_show() {
    jq -r "[$SS_JQ] | map(select($2)) | map(\"\(.state) \(.laddr):\(.lport)->\(.raddr):\(.rport) \(.mode)\" +
        (if .reason then \" \(.reason)\" + (if .peer_reason and .peer_reason != \"0x00000000\" then \"/\(.peer_reason)\" else \"\" end) else \"\" end)) |
        .[:4] | join(\"; \")" "$1" 2>&1
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
    v=$(jq -r '"\(.connections) \(.data_intact) \(.sockets | length) \([.sockets[] | select(.mode == "SMC-D")] | length) \(.smc_d)",
        ([.sockets[] | select(.mode != "SMC-D")][0] | if . then "\(.side) \(.socket) \(.mode): \(.why)" else "-" end)' /tmp/sd.json)
    other=$(printf '%s\n' "$v" | sed -n 2p)
    v=$(printf '%s\n' "$v" | head -n1)
    set -- $v
    echo "smcd-demo: $1 connections, data intact $2, $4 of $3 sockets SMC-D (smc_d $5); first other: $other"
    [ "$1" = $n ] || fail "smcrun demo ran $1 connections, asked for $n"
    [ "$2" = true ] || fail "smcrun demo: data NOT intact"
    [ "$3" = $((2 * n)) ] || fail "smcrun demo reported $3 sockets, expected $((2 * n))"
    [ "$4" = "$3" ] && [ "$5" = "$3" ] || fail "smcrun demo: only $4 of $3 sockets SMC-D: $other$(smcd_why)"
    [ $rc = 0 ] || fail "smcrun demo exited $rc: $(lastl "$(cat /tmp/sd.err)")"
    dev=$(jq '[.sockets[] | select(.device == "loopback-ism" and (.link_group | length) == 8)] | length' /tmp/sd.json)
    [ "$dev" = "$3" ] || fail "smcrun demo names loopback-ism and a link group for $dev of $3 sockets: $(jq -c '[.sockets[] | .device, .link_group]' /tmp/sd.json)"
    smcd_deltas /tmp/sd.s0 /tmp/sd.s1
    set -- $DELTAS
    echo "smcd-demo: kernel: SMC-D succ client +$1 server +$2, SMC-R succ +$3, fallback client +$4 server +$5"
    [ "$1" = $n ] && [ "$2" = $n ] || fail "kernel SMC-D successes grew by client +$1 server +$2, expected +$n each"
    [ "$3" = 0 ] || fail "kernel SMC-R successes grew by $3 during an SMC-D demo"
    [ "$4" = 0 ] && [ "$5" = 0 ] || fail "kernel fallback counters grew (client +$4, server +$5)"
    smcrun demo --connections 1 --bytes 64k | tail -n 4

    # IPv6: redis on ::1 with one idle client: both ends SMCD in sock_diag (matched by port: the
    # addresses of IPPROTO_SMC sockets are filled in from TCP sock_diag)
    p=6479
    bg smcrun redis-server --port $p --bind ::1 --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait $p ::1
    bg smcrun redis-benchmark -h ::1 -p $p -I -c 1 > /tmp/idle.log 2>&1
    filt="(.lport == $p or .rport == $p) and .lport != 0 and .rport != 0 and .state == \"ACTIVE\""
    sd_wait /tmp/sd.ss6 "$filt and .mode == \"SMCD\"" 2 20 ||
        fail "over ::1: smcrun ss --json shows no 2 active SMCD sockets on port $p: $(sd_show /tmp/sd.ss6 "$filt")$(smcd_why)"
    r=$(smcrun redis-cli -h ::1 -p $p set k6 v6 2>&1)
    [ "$r" = OK ] || fail "over ::1: redis-cli set gave '$(first "$r")'"
    echo "smcd-demo: ::1: $(sd_show /tmp/sd.ss6 "$filt")"
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
    smcd_deltas /tmp/sv.s0 /tmp/sv.s1
    set -- $DELTAS
    dconn=$9 drx=$7 dtx=$8
    echo "smcd-views: demo $n x $b B: stats .smcd smc_connections +$dconn rx +$drx tx +$dtx"
    [ "$dconn" = $((2 * n)) ] || fail "stats --json .smcd.summary.smc_connections grew by $dconn, expected $((2 * n)) ($n connections, both ends)$(smcd_why)"
    # each byte is sent and received once by each end of each connection: 2 * n * b at least, each way
    [ "$drx" -ge $((2 * n * b)) ] && [ "$dtx" -ge $((2 * n * b)) ] ||
        fail "stats --json .smcd.rx.bytes +$drx / .tx.bytes +$dtx, expected >= $((2 * n * b)) each"
    # the text: SMC-D's layout with the JSON's numbers, and no SMC-R
    stats_snap /tmp/sv.s2
    smcrun stats -m smcd > /tmp/sv.txt 2>&1 || fail "smcrun stats -m smcd failed: $(first "$(cat /tmp/sv.txt)")"
    head -n 14 /tmp/sv.txt
    grep -q '^SMC-D Connections Summary' /tmp/sv.txt || fail "smcrun stats -m smcd has no SMC-D summary: $(first "$(cat /tmp/sv.txt)")"
    if grep -q 'SMC-R' /tmp/sv.txt; then fail "smcrun stats -m smcd shows SMC-R: $(grep -m1 'SMC-R' /tmp/sv.txt)"; fi
    conns=$(jq -r '.smcd.summary.smc_connections' /tmp/sv.s2)
    shown=$(sed -n 's/^ *SMC connections[ .:]*\([0-9][0-9]*\)$/\1/p' /tmp/sv.txt | head -n1)
    [ "$shown" = "$conns" ] || fail "smcrun stats -m smcd shows '$shown' SMC connections, stats --json .smcd counts $conns"

    # K idle connections held open: ss -D
    bg smcrun redis-server --port $p --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait $p
    bg smcrun redis-benchmark -p $p -I -c $k > /tmp/idle.log 2>&1
    filt="(.rport == $p or .lport == $p) and .state == \"ACTIVE\" and .mode == \"SMCD\""
    sd_wait /tmp/sv.ssd "$filt" $((2 * k)) 20 -D ||
        fail "smcrun ss -D --json shows too few active SMCD sockets on port $p (want $((2 * k))): $(sd_show /tmp/sv.ssd 'true')$(smcd_why)"
    smcrun ss -D > /tmp/sv.ssdt 2>&1 || fail "smcrun ss -D failed: $(first "$(cat /tmp/sv.ssdt)")"
    smcrun linkgroup --json > /tmp/sv.lg 2> /tmp/sv.lg.err || fail "smcrun linkgroup --json failed: $(first "$(cat /tmp/sv.lg.err)")"
    smcrun linkgroup > /tmp/sv.lgt 2>&1 || fail "smcrun linkgroup failed: $(first "$(cat /tmp/sv.lgt)")"
    sd_ss /tmp/sv.ss
    head -n 4 /tmp/sv.ssdt
    cat /tmp/sv.lgt
    # One jq reads them all: -D lists only SMC-D sockets, each ACTIVE one with its DMB (non-zero
    # tokens, loopback-ism's one GID on both ends, its token the peer token of exactly one other
    # socket, its link group in linkgroup --json); linkgroup's SMC-D groups with connections are
    # on loopback-ism (CHID), SMC-Dv2 with the EID, and count as many connections as ss shows.
    v=$(jq -n -r --slurpfile d /tmp/sv.ssd --slurpfile g /tmp/sv.lg --slurpfile s /tmp/sv.ss --argjson chid $LO_CHID "
        [\$s[0] | $SS_JQ] as \$all |
        \$d[0].sockets as \$dl | [\$dl[] | select(.state == \"ACTIVE\")] as \$a |
        [\$g[0].smcd_link_groups[] | select(.conns > 0)] as \$lg |
        [([\$dl[] | select(.mode != \"SMCD\")] | length),
         (\$a | length),
         ([\$a[] | select(.dmbinfo == null)] | length),
         ([\$a[] | select(.dmbinfo.token == \"0000000000000000\" or .dmbinfo.peer_token == \"0000000000000000\")] | length),
         ([\$a[] | select(.dmbinfo.my_gid != .dmbinfo.peer_gid)] | length),
         ([\$a[] | .dmbinfo.token as \$t | select([\$a[] | select(.dmbinfo.peer_token == \$t)] | length != 1)] | length),
         ([\$a[] | .dmbinfo.lgr_id as \$i | select([\$g[0].smcd_link_groups[] | select(.id == \$i)] | length != 1)] | length),
         (\$lg | length),
         ([\$lg[] | select(.chid != \$chid or .device != \"loopback-ism\")] | length),
         ([\$lg[] | .version] | unique | map(tostring) | join(\",\")),
         ([\$lg[] | .eid] | unique | join(\",\")),
         ([\$lg[] | select(.gid != .peer_gid or (.dmb_bytes // 0) == 0)] | length),
         ([\$g[0].smcd_link_groups[].conns] | add // 0),
         ([\$all[] | select(.mode == \"SMCD\" and .state != \"LISTEN\" and .state != \"INIT\" and .state != \"CLOSED\")] | length),
         (\$a[0].dmbinfo.token // \"none\")] | map(tostring) | join(\" \")" 2>&1) || fail "cannot read ss/linkgroup JSON: $(first "$v")"
    set -- $v
    echo "smcd-views: ss -D: $1 non-SMCD, $2 active, $3 without DMB, $4 zero tokens, $5 two GIDs, $6 tokens not crossed, $7 link ids not in linkgroup"
    echo "smcd-views: linkgroup: $8 SMC-D groups with connections, $9 not loopback-ism, versions ${10}, EIDs ${11}, ${12} with two GIDs or no DMB bytes; ${13} connections (ss: ${14})"
    [ "$1" = 0 ] || fail "smcrun ss -D --json lists $1 sockets that are not SMCD"
    [ "$2" -ge $((2 * k)) ] || fail "smcrun ss -D --json shows $2 active sockets, expected >= $((2 * k))"
    [ "$3" = 0 ] || fail "smcrun ss -D --json: $3 active SMC-D sockets without dmbinfo"
    [ "$4" = 0 ] || fail "smcrun ss -D --json: $4 sockets with a zero DMB token or peer token"
    [ "$5" = 0 ] || fail "smcrun ss -D --json: $5 sockets whose peer GID differs from their own (loopback-ism has one GID)"
    [ "$6" = 0 ] || fail "smcrun ss -D --json: $6 DMB tokens that are not exactly one other socket's peer token"
    [ "$7" = 0 ] || fail "smcrun ss -D --json: $7 sockets whose link group (lgr_id) is not one SMC-D group of smcrun linkgroup --json"
    [ "$8" -ge 1 ] || fail "smcrun linkgroup --json lists no SMC-D link group with connections"
    [ "$9" = 0 ] || fail "smcrun linkgroup --json: $9 SMC-D link groups not on loopback-ism (CHID $LO_CHID)"
    [ "${10}" = 2 ] || fail "smcrun linkgroup --json: SMC-D link groups of version '${10}', expected 2 (SMC-Dv2)"
    [ "${11}" = SMCRUN-TEST ] || fail "smcrun linkgroup --json: SMC-D groups negotiated EID '${11}', expected SMCRUN-TEST"
    [ "${12}" = 0 ] || fail "smcrun linkgroup --json: ${12} SMC-D groups with a peer GID not their own or no DMB bytes"
    [ "${13}" = "${14}" ] || fail "smcrun linkgroup --json counts ${13} SMC-D connections, smcrun ss --json shows ${14} SMCD sockets"
    head -n1 /tmp/sv.ssdt | grep -q 'GID Token Peer-GID Peer-Token Linkid' || fail "smcrun ss -D header lacks the DMB columns: $(head -n1 /tmp/sv.ssdt)"
    grep -q " SMCD .*${15}" /tmp/sv.ssdt || fail "smcrun ss -D does not show DMB token ${15} on an SMCD row"
    grep -q 'SMC-D link groups' /tmp/sv.lgt && grep -q ' loopback-ism ' /tmp/sv.lgt ||
        fail "smcrun linkgroup does not list an SMC-D link group on loopback-ism: $(tr '\n' ' ' < /tmp/sv.lgt | cut -c1-200)"

    # device and info: loopback-ism in use by those link groups, missing from the kernel's device dump
    smcrun device --json > /tmp/sv.dev || fail "smcrun device --json failed"
    smcrun device > /tmp/sv.devt 2>&1 || fail "smcrun device failed"
    smcrun info --json > /tmp/sv.info || fail "smcrun info --json failed"
    smcrun info > /tmp/sv.infot 2>&1 || fail "smcrun info failed"
    cat /tmp/sv.devt /tmp/sv.infot
    v=$(jq -n -r --slurpfile d /tmp/sv.dev --slurpfile i /tmp/sv.info '
        [($d[0].smcd_loopback.name // "none"), ($d[0].smcd_loopback.seen_from // "none"), ($d[0].smcd_loopback.link_groups // 0),
         ($d[0].smcd_loopback.in_device_dump | tostring), ($d[0].smcd_devices | length),
         ($i[0].smcd_v2 | tostring), (($i[0].ueids // []) | index("SMCRUN-TEST") != null), ($i[0].smcd_loopback.name // "none")] |
        map(tostring) | join(" ")' 2>&1) || fail "cannot read device/info JSON: $(first "$v")"
    set -- $v
    echo "smcd-views: device: smcd_loopback $1 seen from $2, $3 link groups, in the dump $4, $5 SMC-D devices dumped; info: SMC-Dv2 $6, UEID $7, loopback $8"
    [ "$1" = loopback-ism ] && [ "$2" = link_groups ] && [ "$3" -ge 1 ] ||
        fail "smcrun device --json: loopback-ism not seen in use while SMC-D connections are open: $(tr -d ' \n' < /tmp/sv.dev | cut -c1-200)"
    [ "$4" = false ] && [ "$5" = 0 ] || fail "smcrun device --json: in_device_dump $4, $5 SMC-D devices dumped (6.12 dumps none)"
    grep -q '^loopback-ism: in use' /tmp/sv.devt || fail "smcrun device does not show loopback-ism in use: $(tr '\n' ' ' < /tmp/sv.devt | cut -c1-200)"
    grep -q "not in the kernel's SMC-D device dump" /tmp/sv.devt || fail "smcrun device does not say why loopback-ism is missing from the kernel's device dump"
    [ "$6" = true ] && [ "$7" = true ] && [ "$8" = loopback-ism ] || fail "smcrun info --json: SMC-Dv2 $6, UEID SMCRUN-TEST listed $7, loopback $8$(smcd_why)"
    grep -q '^SMC-D .*v2 Yes (loopback-ism' /tmp/sv.infot || fail "smcrun info does not show SMC-Dv2 on loopback-ism: $(grep '^SMC-D' /tmp/sv.infot)"
    ok
}

# smcd-monitor: while redis-benchmark moves data over SMC-D, `smcrun monitor base -m smcd` shows non-zero
#   rates, connections and buffers, and `-m smcr` (soft-RoCE is idle) shows no connection and no rate.
check_smcd_monitor() {
    need_setup
    need_prog redis-server redis-benchmark
    p=6381
    bg smcrun redis-server --port $p --save '' --appendonly no > /tmp/redis.log 2>&1
    redis_wait $p
    bg smcrun redis-benchmark -p $p -t set -d 4096 -n 10000000 -c 2 -q > /dev/null 2>&1
    sleep 1
    smcrun monitor base -m smcd -i 1 --count 3 --json > /tmp/sm.mon 2> /tmp/sm.err || fail "smcrun monitor base -m smcd --json failed: $(first "$(cat /tmp/sm.err)")"
    smcrun monitor base -m smcr -i 1 --count 1 --json > /tmp/sm.monr 2>&1 || fail "smcrun monitor base -m smcr --json failed: $(first "$(cat /tmp/sm.monr)")"
    smcrun monitor base -m smcd -i 1 --count 2
    cat /tmp/sm.mon /tmp/sm.monr
    v=$(jq -n -r --slurpfile d /tmp/sm.mon --slurpfile r /tmp/sm.monr '
        [($d | length),
         ([$d[] | select(.mode == "smcd" and .rx_rate_bytes_per_sec > 0 and .tx_rate_bytes_per_sec > 0 and .rx_requests_per_sec > 0 and .conns >= 2 and .rx_bufs_bytes > 0)] | length),
         ([$r[] | select(.mode == "smcr" and .conns == 0 and .rx_rate_bytes_per_sec == 0 and .tx_rate_bytes_per_sec == 0)] | length)] |
        map(tostring) | join(" ")' 2>&1) || fail "cannot read smcrun monitor --json: $(first "$v")"
    set -- $v
    echo "smcd-monitor: $1 lines, $2 busy; -m smcr idle lines: $3"
    [ "$1" = 3 ] || fail "smcrun monitor -m smcd --count 3 printed $1 lines"
    [ "$2" -ge 1 ] || fail "smcrun monitor base -m smcd showed no line with non-zero rates, >= 2 connections and buffers while redis-benchmark ran: $(lastl "$(cat /tmp/sm.mon)")$(smcd_why)"
    [ "$3" = 1 ] || fail "smcrun monitor base -m smcr counts the SMC-D traffic: $(cat /tmp/sm.monr)"
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
        # (no jq in the loop; a loaded host can take seconds to start it)
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
    v=$(jq -n -r --slurpfile a /tmp/sp.ss.6379 --slurpfile b /tmp/sp.ss.6380 "
        def client(p): [(.[0] | $SS_JQ) | select(.rport == p and .lport != 0 and .state == \"ACTIVE\")][0].mode // \"none\";
        [(\$a | client(6379)), (\$b | client(6380))] | join(\" \")" 2>&1) || fail "cannot read smcrun ss --json: $(first "$v")"
    set -- $v
    m79=$1 m80=$2
    smcd_deltas /tmp/sp.s0.6379 /tmp/sp.s1.6379
    set -- $DELTAS
    dc79=$1
    smcd_deltas /tmp/sp.s0.6380 /tmp/sp.s1.6380
    set -- $DELTAS
    dc80=$1 pn80=$6
    echo "smcd-policy: client to 6379: $m79 in sock_diag, SMC-D client succ +$dc79; to 6380: $m80, SMC-D client succ +$dc80, server PEERNOSMC +$pn80"
    [ "$m79" = SMCD ] || fail "client to 6379 under '$pol' is $m79 in sock_diag, expected SMCD$(smcd_why)"
    [ "$dc79" = 1 ] || fail "kernel SMC-D client successes grew by $dc79 for the connection to 6379, expected 1"
    # the client's socket became TCP before connecting: no active SMC client socket in the dump
    [ "$m80" != SMCD ] || fail "client to 6380 under '$pol' runs SMC-D"
    [ "$dc80" = 0 ] || fail "the TCP-by-policy connection to 6380 counted as an SMC-D client success"
    [ "$pn80" = 1 ] || fail "the server on 6380 counted $pn80 fallbacks 0x03010000 (peer offered no SMC), expected 1"
    ok
}

# smcd-fallback: SMC-D's own fallback reasons, decoded by ss and counted by stats, with the data intact:
#   no UEID (SMC-Dv2 cannot be offered: the server says NOUEID, the client sees its decline), a plain
#   server, a plain client.
check_smcd_fallback() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli
    without_ueid fallback_case no-ueid smcrun smcrun 127.0.0.1 6390 127.0.0.1 '0x05000000 PEERDECL' '0x03030008 NOUEID'
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
    # snapshots of each end until both show the connection, while the client runs (no jq in the loop)
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
    v=$(jq -n -r --slurpfile sa /tmp/sc.ssa --slurpfile sb /tmp/sc.ssb --slurpfile a0 /tmp/sc.a0 --slurpfile a1 /tmp/sc.a1 \
        --slurpfile b0 /tmp/sc.b0 --slurpfile b1 /tmp/sc.b1 "$SMCD_STATS_JQ"'
        def mode(f): [.[0].sockets[] | select(.state == "ACTIVE" and f)][0] | if . then .mode + (if .fallback then ":" + .fallback.reason + "/" + .fallback.peer_diagnosis else "" end) else "none" end;
        [($sa | mode(.local | endswith(":7000"))), ($sb | mode(.peer | endswith(":7000"))),
         (($a1[0] | smcd).srv_succ - ($a0[0] | smcd).srv_succ), (($b1[0] | smcd).clnt_succ - ($b0[0] | smcd).clnt_succ),
         (($a1[0] | smcd).clnt_succ - ($a0[0] | smcd).clnt_succ)] | map(tostring) | join(" ")' 2>&1) || fail "cannot read the namespaces' JSON: $(first "$v")"
    set -- $v
    echo "smcd-containers: server end (smcd-a) $1, client end (smcd-b) $2; SMC-D server succ in smcd-a +$3, client succ in smcd-b +$4 (client succ in smcd-a +$5)"
    [ "$1" = SMCD ] && [ "$2" = SMCD ] || fail "across namespaces: server end $1, client end $2, expected SMCD both$(smcd_why)"
    [ "$3" = 1 ] && [ "$4" = 1 ] && [ "$5" = 0 ] ||
        fail "per-namespace SMC-D successes: server in smcd-a +$3, client in smcd-b +$4, client in smcd-a +$5 (expected 1, 1, 0)"
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
        for f in $(cd /tmp/fx/smcd && ls); do echo "- \`$f\` ($(wc -c < "/tmp/fx/smcd/$f") bytes): $(fx_what "$f")"; done
        echo
        echo "## smcd-fallback/"
        echo
        echo "Then \`smcrun ueid del SMCRUN-TEST\`, a new \`smcrun redis-server --port 6379\` with one idle"
        echo "\`smcrun redis-benchmark -I -c 1\` connection (no UEID: server 0x03030008 NOUEID, client 0x05000000"
        echo "PEERDECL) and one plain \`redis-benchmark -I -c 1\` connection (server 0x03010000 PEERNOSMC), all open:"
        echo "\`smcrun __capture smcd-fallback\`. The statistics still hold the SMC-D traffic of smcd/."
        echo
        for f in $(cd /tmp/fx/smcd-fallback && ls); do echo "- \`$f\` ($(wc -c < "/tmp/fx/smcd-fallback/$f") bytes): $(fx_what "$f")"; done
    } > /tmp/fx.smcd.README.md
    mv /tmp/fx.smcd.README.md /tmp/fx/smcd/README.md
    for f in $(cd /tmp/fx && find . -type f | sed 's|^\./||' | sort); do
        send_file "fixtures/$f" "/tmp/fx/$f"
    done
    echo "smcd-fixtures: $(find /tmp/fx -name '*.bin' | wc -l) files sent"
    [ -z "$FX_MISSING" ] || fail "smcrun __capture did not capture:$FX_MISSING"
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
    list=$(rt_wait "map(select(.pid == $held and .report.connections.smc_d == 1)) | length == 1") ||
        fail "smcrun ps does not show the server's SMC-D connection: $(echo $list | cut -c1-300)"
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
    local p0=7300 p=7301 o l d nsb v
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
    scopes_json /tmp/sn.list
    smcrun attach --list
    smcrun metrics > /tmp/sn.metrics 2>&1 || fail "smcrun metrics: $(first "$(cat /tmp/sn.metrics)")"
    v=$(jq -n -r --slurpfile ss /tmp/sn.ssb --slurpfile ps /tmp/sn.ps --slurpfile ls /tmp/sn.list --arg d "$d" \
        --slurpfile a0 /tmp/sn.a0 --slurpfile a1 /tmp/sn.a1 --slurpfile b0 /tmp/sn.b0 --slurpfile b1 /tmp/sn.b1 \
        --slurpfile c0 /tmp/sn.c0 --slurpfile c1 /tmp/sn.c1 "$SMCD_STATS_JQ"'
        def dd(x; y; k): ((y[0] | smcd)[k] - (x[0] | smcd)[k]);
        ([$ss[0].sockets[] | select(.state == "ACTIVE" and .peer == "10.6.0.1:7301")][0].mode // "none"),
        ([$ss[0].sockets[] | select(.peer | endswith(":7300"))] | length),
        ([$ls[0].scopes[] | select(.scope == "netns") | "\(.netns):\(.converted):\(.kept_tcp):\(.programs[0].program)"] | sort | join(",")),
        ([$ps[0].smc_processes[] | select(.name == "sechod" and .smcd > 0) | .bpf_scope] | unique | join(",")),
        ($ps[0].bpf_scopes.netns | length),
        ([dd($a0; $a1; "srv_succ"), dd($b0; $b1; "clnt_succ"), dd($a0; $a1; "srv_peernosmc"),
          dd($a0; $a1; "clnt_fback"), dd($b0; $b1; "clnt_fback"), dd($b0; $b1; "srv_fback"), dd($c0; $c1; "clnt_succ")] | map(tostring) | join(" "))' 2>&1) ||
        fail "cannot read the namespaces' JSON: $(first "$v")"
    echo "$v"
    set -- $(printf '%s\n' "$v" | tr ' ' '_')
    [ "$1" = SMCD ] || fail "smc_diag in smcd-b: the new connection is $1, expected SMCD$(smcd_why)"
    [ "$2" = 0 ] || fail "smc_diag in smcd-b lists $2 sockets of the old TCP connection (port $p0): it was touched"
    [ "$3" = "/proc/$d/ns/net:2:0:sechod,/run/netns/smcd-a:1:0:sechod" ] ||
        fail "attach --list: $3, expected smcd-b (by pid) 2 sockets, smcd-a 1 (the listener), all by sechod"
    [ "$4" = "netns_/proc/$d/ns/net" ] || fail "ps --all in smcd-b: the SMC-D sechod's scope is '$4', expected netns /proc/$d/ns/net: $(jq -c '[.smc_processes[] | [.pid, .name, .smcd, .bpf_scope]], .bpf_scopes' /tmp/sn.ps 2>&1 | cut -c1-300)"
    [ "$5" = 2 ] || fail "ps --all shows $5 netns scopes, expected 2"
    set -- $(printf '%s\n' "$v" | tail -n1)
    echo "SMC-D: server succ in smcd-a +$1, client succ in smcd-b +$2; smcd-a PEERNOSMC +$3; fallbacks: smcd-a client +$4, smcd-b client +$5 server +$6; smcd-c client succ +$7"
    [ "$1 $2 $3 $4 $5 $6 $7" = "2 2 1 0 0 0 0" ] ||
        fail "counters: expected SMC-D +2 in smcd-a and smcd-b (as attach --list counts), smcd-c's one connection a PEERNOSMC fallback in smcd-a, nothing else"
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

# shellcheck shell=dash
# The operator's tools on the guest's real SMC kernel (sourced by checks.sh): the exporter's
# counters against `smcrun stats --json` after known traffic, its per-process series against the
# runtime's reports, doctor's SMC checks, atomic textfile writes under concurrent reads, a scrape
# with 10,000 AF_SMC sockets, and the smc module unloaded and loaded again under a running
# exporter. Uses checks.sh's plumbing (fail, ok, bg, stats_snap, need_setup, ...); vmcheck
# (tests/vm/check) reads the views' saved JSON and compares the scrapes with it.
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2154

OPS_PORT=9609
# Watchdog seconds (checks.sh's run_check reads these): these checks start many programs, each
# slow under TCG on a loaded host (ops-exporter took 36-66 s).
CHECK_LIMIT_ops_exporter=180
CHECK_LIMIT_ops_doctor=120
CHECK_LIMIT_ops_textfile=150
CHECK_LIMIT_ops_scale=150

# mval FILE SERIES: the value of exactly that series (name{labels} as the exporter writes it)
mval() {
    awk -v s="$2" 'index($0, s " ") == 1 { print $2; found = 1; exit } END { if (!found) print "missing" }' "$1"
}
# msum FILE NAME [REGEX]: the sum of a family's samples whose line matches REGEX
msum() {
    awk -v n="$2" -v re="${3:-.}" 'index($0, n "{") == 1 || index($0, n " ") == 1 { if ($0 ~ re) { s += $2; c++ } } END { if (c) print s; else print "missing" }' "$1"
}
# scrape FILE [PORT]: GET /metrics from the exporter into FILE
scrape() {
    wget -q -O "$1" "http://127.0.0.1:${2:-$OPS_PORT}/metrics" 2> /tmp/ops.wget || fail "GET /metrics on port ${2:-$OPS_PORT} failed: $(first "$(cat /tmp/ops.wget)")"
    grep -q '^smcrun_build_info' "$1" || fail "GET /metrics gave no whole scrape: $(lastl "$(cat "$1")")"
}
# exporter_up PORT: start `smcrun exporter` on 127.0.0.1:PORT and wait until it answers
exporter_up() {
    local i
    bg smcrun exporter --listen "127.0.0.1:$1" > "/tmp/exporter.$1.log" 2>&1
    i=0
    while ! wget -q -O /dev/null "http://127.0.0.1:$1/metrics" 2> /dev/null; do
        i=$((i + 1))
        [ $i -gt 100 ] && fail "smcrun exporter did not answer on 127.0.0.1:$1: $(first "$(cat "/tmp/exporter.$1.log")")"
        sleep 0.2
    done
}

# 9. ops-exporter: after a known `smcrun demo`, every counter the exporter serves equals
#    `smcrun stats --json`'s; the demo's connections are counted; link groups, links and RDMA
#    resources agree with the views; the per-process series agree with `smcrun ps --json`.
check_ops_exporter() {
    need_setup
    need_prog redis-server redis-benchmark redis-cli wget
    exporter_up $OPS_PORT
    scrape /tmp/ops.m0
    [ "$(mval /tmp/ops.m0 smc_up)" = 1 ] || fail "smc_up is $(mval /tmp/ops.m0 smc_up) on a kernel with SMC"
    n=3
    smcrun demo --json --connections $n --bytes 128k > /tmp/ops.demo 2> /tmp/ops.demo.err ||
        fail "smcrun demo failed: $(lastl "$(cat /tmp/ops.demo.err)")"
    # A quiet system: the counters must not move between the stats before and after the scrape.
    stats_snap /tmp/ops.s1
    scrape /tmp/ops.m1
    stats_snap /tmp/ops.s2
    cmp -s /tmp/ops.s1 /tmp/ops.s2 || fail "the counters moved while scraping (something else ran): $(diff /tmp/ops.s1 /tmp/ops.s2 | head -n3 | tr '\n' ' ')"
    line=$(vmcheck exporter-stats /tmp/ops.s1 /tmp/ops.m1) || fail "$line"
    d=$(($(mval /tmp/ops.m1 'smc_connections_total{technology="smcr",role="client",version="v2"}') - $(mval /tmp/ops.m0 'smc_connections_total{technology="smcr",role="client",version="v2"}')))
    [ "$d" = $n ] || fail "smc_connections_total (client, v2) grew by $d over the demo of $n connections"
    drx=$(($(mval /tmp/ops.m1 'smc_bytes_total{technology="smcr",direction="rx"}') - $(mval /tmp/ops.m0 'smc_bytes_total{technology="smcr",direction="rx"}')))
    [ "$drx" -ge $((2 * n * 131072)) ] || fail "smc_bytes_total rx grew by $drx, less than the demo's 2 x $n x 128 KiB"
    echo "ops-exporter: $line; demo +$n connections, rx +$drx bytes"

    # Open connections: link groups, links, RDMA and the programs' reports.
    p=6400
    redis_bg $p
    bg smcrun redis-benchmark -p $p -I -c 2 > /tmp/idle.log 2>&1
    # both sides settled (each writes its report at most once a second): the scrape and the
    # reports read after it must then agree (waiting for the server alone let the client's
    # report change between the two: "redis-benchmark mode smcr is 0, its report says 2")
    for prog in redis-server redis-benchmark; do
        line=$(vmcheck --wait 150 ps-smcr --running $prog 2) || fail "$line"
        echo "$line"
    done
    smcrun linkgroup --json > /tmp/ops.lg || fail "smcrun linkgroup --json failed"
    smcrun rdma --json > /tmp/ops.rdma || fail "smcrun rdma --json failed"
    scrape /tmp/ops.m2
    smcrun ps --json > /tmp/ops.ps2 2> /dev/null
    procs=$(vmcheck exporter-ps /tmp/ops.ps2 /tmp/ops.m2) || fail "$procs"
    lg=$(vmcheck exporter-linkgroup /tmp/ops.lg /tmp/ops.m2 4) || fail "$lg (2 idle SMC-R connections open)"
    rdma=$(vmcheck exporter-rdma /tmp/ops.rdma /tmp/ops.m2 "$RXE") || fail "$rdma"
    [ "$(mval /tmp/ops.m2 smcrun_scrape_errors_total)" = 0 ] || fail "the exporter counted scrape errors: $(grep collector_success /tmp/ops.m2 | tr '\n' ' ')"
    echo "ops-exporter: $lg, $rdma, $procs"
    ok
}

# 10. ops-doctor: on the set-up guest every SMC check passes (BPF mode, unchecked without --bpf, is
#     one skipped row); warnings come only from the IPv6/Java
#     advice (6.12 < 6.14) and the live counters, whose ratios must be the kernel's (stats --json)
#     and whose advice names the sysctl; a dynamically linked program is reachable.
check_ops_doctor() {
    need_setup
    # Traffic first, so that the counter rows have something to judge.
    smcrun demo --connections 2 --bytes 256k > /dev/null 2>&1 || fail "smcrun demo failed before doctor"
    smcrun doctor --json > /tmp/ops.doc
    rc=$?
    smcrun doctor > /tmp/ops.doc.txt
    cat /tmp/ops.doc.txt
    o=$(vmcheck doctor-passed /tmp/ops.doc kernel smc smc_diag rdma smc-devices smc-rv2 pnet sysctls memlock --exit $rc) || fail "$o"
    echo "$o"
    # The buffer rows judge the live counters (the earlier checks' traffic fills 64 KiB buffers
    # often): whatever they say, their ratio is the kernel's and a warning names the sysctl with
    # its value now. The fallbacks row too judges what the earlier checks did (the fallback check
    # makes some): its numbers are the kernel's.
    stats_snap /tmp/ops.docs
    o=$(vmcheck doctor-counters /tmp/ops.doc /tmp/ops.docs "$(cat /proc/sys/net/smc/rmem)") || fail "$o"
    echo "$o"
    o=$(vmcheck doctor-passed-but /tmp/ops.doc ipv6-java fallbacks bpf rx-buffer-full tx-buffer peer-buffer) || fail "$o"
    [ $rc -le 1 ] || fail "smcrun doctor exited $rc on a set-up SMC kernel"
    o=$(vmcheck doctor-sysctls /tmp/ops.doc wmem) || fail "$o"
    smcrun doctor --json -- redis-server --port 1 > /tmp/ops.doc2
    o=$(vmcheck doctor-passed /tmp/ops.doc2 program) || fail "doctor -- redis-server: $o"
    ok
}

# 11. ops-textfile: `smcrun exporter --textfile DIR` rewrites DIR/smcrun.prom 20 times a second
#     while a reader copies it 200 times: every copy is a whole scrape, and no *.prom but
#     smcrun.prom ever appears (node_exporter reads every *.prom).
check_ops_textfile() {
    need_setup
    d=/tmp/textfile
    rm -rf $d
    mkdir -p $d
    bg smcrun exporter --textfile $d --interval 0.05 > /tmp/tf.log 2>&1
    i=0
    while [ ! -e $d/smcrun.prom ]; do
        i=$((i + 1))
        [ $i -gt 100 ] && fail "no $d/smcrun.prom after 20 s: $(first "$(cat /tmp/tf.log)")"
        sleep 0.2
    done
    # The reads race the writer; they are checked afterwards (two processes per read: quick
    # enough under TCG to overlap many writes).
    n=0
    rm -rf /tmp/tf.copies
    mkdir -p /tmp/tf.copies
    : > /tmp/tf.ls
    while [ $n -lt 200 ]; do
        cat $d/smcrun.prom > /tmp/tf.copies/$n || fail "reading $d/smcrun.prom failed (it must always be there)"
        ls -a $d >> /tmp/tf.ls
        n=$((n + 1))
    done
    for f in /tmp/tf.copies/*; do
        head -n1 "$f" | grep -q '^# HELP smc_up ' || fail "copy $(basename "$f") starts with '$(head -n1 "$f" | cut -c1-60)'"
        tail -n1 "$f" | grep -q '^smcrun_build_info{.*} 1$' || fail "copy $(basename "$f") is cut short: ends with '$(tail -n1 "$f" | cut -c1-60)'"
        grep -q '^smc_up 1$' "$f" || fail "copy $(basename "$f") has no smc_up 1"
    done
    stray=$(grep '\.prom$' /tmp/tf.ls | grep -v '^smcrun\.prom$' | head -n1)
    [ -z "$stray" ] || fail "a file node_exporter would read appeared: $stray"
    versions=$(md5sum /tmp/tf.copies/* | cut -d' ' -f1 | sort -u | wc -l)
    [ "$versions" -ge 5 ] || fail "only $versions different files in 200 reads: the writer did not rewrite it during the reads"
    echo "ops-textfile: 200 reads, all whole, $versions different versions seen"
    ok
}

# 12. ops-scale: 10,000 listening AF_SMC sockets (bench's views-cost holds them): one scrape in a
#     running exporter counts them all; its CPU cost is logged (bench/README.md has the figures).
check_ops_scale() {
    need_setup
    need_prog views-cost
    out=$(views-cost 10000 0 3 2 2>&1) || fail "views-cost failed: $(lastl "$out")"
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep '^smcrun exporter: one scrape')
    [ -n "$line" ] || fail "views-cost measured no exporter scrape: $(lastl "$out")"
    counted=$(printf '%s\n' "$line" | sed -n 's/.*smc_sockets adds up to \([0-9]*\).*/\1/p')
    [ "${counted:-0}" -ge 10000 ] || fail "the scrape with 10,000 sockets counted ${counted:-none}"
    vmlog "ops-scale: $line"
    ok
}

# 13. ops-reload (it unloads smc; run_check loads it again if a failure leaves it out): a running exporter sees smc unloaded (smc_up 0, no SMC
#     series, no error, still serving) and loaded again (smc_up 1, counters from zero: nothing
#     stale), then SMC-R works again (the UEID restored).
check_ops_reload() {
    need_setup
    port=9611
    smcrun demo --connections 1 --bytes 64k > /dev/null 2>&1 || fail "smcrun demo failed before the unload"
    exporter_up $port
    epid=$(cat /tmp/check.pids | tail -n1)
    scrape /tmp/rl.m0 $port
    [ "$(mval /tmp/rl.m0 smc_up)" = 1 ] || fail "smc_up is not 1 before the unload"
    before=$(mval /tmp/rl.m0 'smc_connections_total{technology="smcr",role="client",version="v2"}')
    [ "$before" -gt 0 ] || fail "no SMC-R connections counted before the unload, after a demo"
    smc_unload || fail "rmmod smc kept failing for 20 s: $(first "$(cat /tmp/smc.rmmod)")"
    scrape /tmp/rl.m1 $port
    [ "$(mval /tmp/rl.m1 smc_up)" = 0 ] || fail "smc_up is $(mval /tmp/rl.m1 smc_up) with smc unloaded"
    grep -q '^smc_bytes_total' /tmp/rl.m1 && fail "SMC counters are still served with smc unloaded (stale)"
    [ "$(mval /tmp/rl.m1 smcrun_scrape_errors_total)" = 0 ] || fail "an unloaded module counted as a scrape error"
    kill -0 "$epid" 2> /dev/null || fail "the exporter died when smc was unloaded"
    out=$(smc_reload) || fail "loading smc again: $out"
    scrape /tmp/rl.m2 $port
    [ "$(mval /tmp/rl.m2 smc_up)" = 1 ] || fail "smc_up is $(mval /tmp/rl.m2 smc_up) after loading smc again"
    after=$(mval /tmp/rl.m2 'smc_connections_total{technology="smcr",role="client",version="v2"}')
    [ "$after" = 0 ] || fail "smc_connections_total is $after right after the reload (was $before): a stale value"
    smcrun demo --json --connections 1 --bytes 64k > /tmp/rl.demo 2>&1 || fail "smcrun demo after the reload failed: $(lastl "$(cat /tmp/rl.demo)")"
    cat /tmp/rl.demo
    # The first link group after a fresh load is made by this demo: on a loaded host, TCG can take
    # longer than the kernel's wait for the first QP confirm link (seen once in a full suite with
    # five other jobs on the machine: both sides fell back, server 0x02010000). That fallback is
    # the kernel's, reported as such; the check says so and makes one more connection, which then
    # has to be SMC-R (the counters below count SMC-R connections only).
    if vmcheck demo-fell-back /tmp/rl.demo server 0x02010000 > /dev/null; then
        echo "ops-reload: the first link after the reload timed out confirming (0x02010000, the kernel's wait under TCG): one more demo"
        smcrun demo --json --connections 1 --bytes 64k > /tmp/rl.demo 2>&1 || fail "smcrun demo after the reload failed: $(lastl "$(cat /tmp/rl.demo)")"
        cat /tmp/rl.demo
    fi
    why=$(vmcheck demo-smcr /tmp/rl.demo 2) || fail "the demo after the reload did not run over SMC-R: $why"
    scrape /tmp/rl.m3 $port
    [ "$(mval /tmp/rl.m3 'smc_connections_total{technology="smcr",role="client",version="v2"}')" = 1 ] ||
        fail "after one connection the counter is $(mval /tmp/rl.m3 'smc_connections_total{technology="smcr",role="client",version="v2"}')"
    echo "ops-reload: smc unloaded (smc_up 0, no SMC series) and loaded (counters $before -> 0 -> 1) under one exporter"
    ok
}

# shellcheck shell=dash
# The integrity soak (sourced by checks.sh): tests/vm/progs/soak.c moves the same transfers (same
# seed, so the same sizes, cases and bytes) by three movers, one after the other:
#   native   `soak ... smc`: the program makes AF_SMC sockets itself, no shim: only the kernel
#   preload  `smcrun soak ... inet`: AF_INET sockets the shim makes SMC
#   bpf      `smcrun --bpf -- soak ... inet`: AF_INET sockets the kernel makes SMC (BPF mode)
# Each mover must have every transfer intact, and the kernel's counters must show every connection
# over the transport (SMC-R in `soak`, SMC-D in `smcd-soak`) and no fallback. The checks run every
# mover even when one fails, and say which failed, so that a failure tells whose it is.
# Knobs (tests/vm/run writes the host's SOAK_* into /vm/config): see tests/vm/README.md.
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2154

# (tests/vm/run always sets SOAK_LIMIT, and gives qemu as much more time)
CHECK_LIMIT_soak=$SOAK_LIMIT
CHECK_LIMIT_smcd_soak=$SOAK_LIMIT

# soak_movers TRANSPORT PORT MAX BIG: the soak by each mover of SOAK_MOVERS over TRANSPORT (SMCR
#   or SMCD), servers on PORT, PORT+1, ...; fails naming every mover that failed and why
soak_movers() {
    local transport=$1 port=$2 movers=${SOAK_MOVERS:-native preload bpf} m pre fam args rc sum bad= bytes0= b srvfail n spid kernel
    need_setup
    need_prog soak
    n=${SOAK_TRANSFERS:-200}
    args="-s ${SOAK_SEED:-1} -n $n -w ${SOAK_WORKERS:-4} -m ${SOAK_MAX:-$3} -d ${SOAK_DEADLINE:-60} -r ${SOAK_RATE:-64k}"
    # SO_LINGER: the kernel's 2 s limit in shutdown(SHUT_WR) (see soak_probe) is lifted, so that a
    # failure here is not that known one; SOAK_LINGER=0 hunts it (the long runs in the README did)
    [ "${SOAK_LINGER:-30}" != 0 ] && args="$args -l ${SOAK_LINGER:-30}"
    [ -n "${SOAK_BIG-$4}" ] && args="$args -b ${SOAK_BIG-$4}"
    [ -n "${SOAK_CASES:-}" ] && args="$args -c $SOAK_CASES"
    for m in $movers; do
        case $m in
        native) pre= fam=smc ;;
        preload) pre=smcrun fam=inet ;;
        bpf) bpf_setup; pre="smcrun --bpf --" fam=inet ;;
        *) fail "SOAK_MOVERS: unknown mover '$m' (expected native, preload, bpf)" ;;
        esac
        stats_snap /tmp/soak.$m.s0
        bg $pre soak server $fam 127.0.0.1 $port > /tmp/soak.$m.srv 2>&1
        spid=$(tail -n1 /tmp/check.pids)
        wait_for /tmp/soak.$m.srv listening 600 || fail "$m: the soak server did not listen: $(first "$(cat /tmp/soak.$m.srv)")"
        echo "$m: $pre soak client $fam 127.0.0.1 $port $args"
        $pre soak client $fam 127.0.0.1 $port $args > /tmp/soak.$m.out 2>&1
        rc=$?
        stats_snap /tmp/soak.$m.s1
        kill $spid 2> /dev/null
        wait $spid 2> /dev/null
        cat /tmp/soak.$m.out /tmp/soak.$m.srv
        sum=$(grep '^soak: family=' /tmp/soak.$m.out)
        # every transfer is one connection: all over TRANSPORT, none fell back
        kernel=$(vmcheck stats-transport /tmp/soak.$m.s0 /tmp/soak.$m.s1 $transport $n) || bad="$bad; $m: $kernel"
        echo "$m over $transport: rc=$rc $sum; $kernel"
        if [ -z "$sum" ]; then
            bad="$bad; $m: no summary (rc $rc): $(lastl "$(cat /tmp/soak.$m.out)")"
        elif [ "$rc" != 0 ]; then
            bad="$bad; $m: ${sum#soak: }: $(grep -m1 '^soak: FAIL' /tmp/soak.$m.out | sed 's/^soak: //')"
        fi
        srvfail=$(grep -c '^soak server: FAIL' /tmp/soak.$m.srv)
        [ "$srvfail" = 0 ] || bad="$bad; $m: the server saw $srvfail failures: $(grep -m1 '^soak server: FAIL' /tmp/soak.$m.srv | sed 's/^soak server: //')"
        # the same seed and options: the same transfers and bytes for every mover
        b=$(printf '%s\n' "$sum" | sed -n 's/.* bytes=\([0-9]*\) .*/\1/p')
        [ -z "$bytes0" ] && bytes0=$b
        [ -z "$b" ] || [ "$b" = "$bytes0" ] || bad="$bad; $m: moved bytes=$b, the first mover $bytes0 (not the same transfers)"
        port=$((port + 1))
    done
    [ -z "$bad" ] || fail "${bad#; }"
}

# soak_probe PORT: the kernel's own data loss, with the native program (no shim): a reader that waits
#   3 s before it reads, 64 and 96 KiB written and shutdown(SHUT_WR) (case slow). SMC's shutdown waits
#   at most 2 s (SMC_MAX_STREAM_WAIT_TIMEOUT) for its send buffer to drain, then sends its close with
#   the rest unsent: the reader gets a clean EOF, short. Reported as seen or not (it is a race, seen
#   in most runs); with SO_LINGER 10 s the same transfers must be intact (else the check fails).
soak_probe() {
    local k l p seen
    bg soak server smc 127.0.0.1 $1 > /tmp/soak.probe.srv 2>&1
    wait_for /tmp/soak.probe.srv listening 600 || fail "probe: the soak server did not listen: $(first "$(cat /tmp/soak.probe.srv)")"
    soak client smc 127.0.0.1 $1 -w 1 -n 4 -c slow -b 64k,96k,64k,96k > /tmp/soak.probe.out 2>&1
    soak client smc 127.0.0.1 $1 -w 1 -n 4 -c slow -b 64k,96k,64k,96k -l 10 > /tmp/soak.probe.linger 2>&1
    # the same client under the preload (AF_INET sockets the shim makes SMC, no SO_LINGER): the
    # shim's shutdown hook waits for the send buffer, so the slow reader must get every byte
    smcrun soak client inet 127.0.0.1 $1 -w 1 -n 4 -c slow -b 64k,96k,64k,96k > /tmp/soak.probe.shim 2>&1
    cat /tmp/soak.probe.out /tmp/soak.probe.linger /tmp/soak.probe.shim
    k=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.out)
    l=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.linger)
    p=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.shim)
    seen="not seen this time"
    [ "${k:-0}" -gt 0 ] && seen=seen
    echo "kernel probe: shutdown(SHUT_WR) with a reader 3 s late lost the tail in ${k:-?} of 4 transfers (the kernel's 2 s limit: $seen), with SO_LINGER 10 s in ${l:-?} of 4, under smcrun (its shutdown waits) in ${p:-?} of 4"
    [ "$l" = 0 ] || fail "kernel probe: with SO_LINGER 10 s the slow reader still lost data: $(grep -m1 '^soak: FAIL' /tmp/soak.probe.linger | sed 's/^soak: //')"
    [ "$p" = 0 ] || fail "under smcrun the slow reader lost data (the shim's shutdown did not wait for the send buffer): $(grep -m1 '^soak: FAIL' /tmp/soak.probe.shim | sed 's/^soak: //'; lastl "$(cat /tmp/soak.probe.shim)")"
    # close(): the server writes 64 or 96 KiB and closes at once, the reader is 3 s late (case
    # late). The kernel's close waits the same 2 s: the native server (no shim) may lose the tail
    # (reported); the same server under the preload, whose close hook sets SO_LINGER on an SMC
    # socket with unsent bytes, must not (else the check fails).
    local c s2
    bg smcrun soak server inet 127.0.0.1 $(($1 + 50)) > /tmp/soak.probe.srv2 2>&1
    wait_for /tmp/soak.probe.srv2 listening 600 || fail "probe: the soak server under smcrun did not listen: $(first "$(cat /tmp/soak.probe.srv2)")"
    soak client smc 127.0.0.1 $1 -w 1 -n 4 -c late -b 64k,96k,64k,96k > /tmp/soak.probe.close 2>&1
    soak client smc 127.0.0.1 $(($1 + 50)) -w 1 -n 4 -c late -b 64k,96k,64k,96k > /tmp/soak.probe.closeshim 2>&1
    cat /tmp/soak.probe.close /tmp/soak.probe.closeshim
    c=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.close)
    s2=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.closeshim)
    seen="not seen this time"
    [ "${c:-0}" -gt 0 ] && seen=seen
    echo "kernel probe: close() with a reader 3 s late lost the tail in ${c:-?} of 4 transfers (the kernel's 2 s limit: $seen), with the server under smcrun (its close sets SO_LINGER) in ${s2:-?} of 4"
    [ "$s2" = 0 ] || fail "under smcrun a server's close lost data for a late reader (the shim's close did not set SO_LINGER): $(grep -m1 '^soak: FAIL' /tmp/soak.probe.closeshim | sed 's/^soak: //'; lastl "$(cat /tmp/soak.probe.closeshim)")"
    # The other calls that close a socket: the same server under smcrun closing each connection by
    # dup2(2) of /dev/null over it (the JDK's close of a socket another thread is blocked on) and
    # by close_range(2): the shim prepares those closes as close()'s, so the late reader gets all.
    local how n p2=$(($1 + 60))
    for how in dup2 close_range; do
        bg env SOAK_CLOSE=$how smcrun soak server inet 127.0.0.1 $p2 > /tmp/soak.probe.srv.$how 2>&1
        wait_for /tmp/soak.probe.srv.$how listening 600 || fail "probe: the soak server under smcrun (SOAK_CLOSE=$how) did not listen: $(first "$(cat /tmp/soak.probe.srv.$how)")"
        soak client smc 127.0.0.1 $p2 -w 1 -n 2 -c late -b 64k,96k > /tmp/soak.probe.$how 2>&1
        cat /tmp/soak.probe.$how
        n=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.$how)
        echo "kernel probe: $how over a socket with a reader 3 s late, the server under smcrun: lost the tail in ${n:-?} of 2 transfers"
        [ "$n" = 0 ] || fail "under smcrun a server's $how over its socket lost data for a late reader (not prepared as a close): $(grep -m1 '^soak: FAIL' /tmp/soak.probe.$how | sed 's/^soak: //'; lastl "$(cat /tmp/soak.probe.$how) $(cat /tmp/soak.probe.srv.$how)")"
        p2=$((p2 + 1))
    done
    # A server that ends with exit(3) or _exit(2) instead of a close: the kernel closes an exiting
    # process's sockets with no wait at all (smc_close_active's timeout is 0 then, linger or not),
    # so the native server loses what its send buffer holds; under smcrun the process lets the
    # unsent bytes of its own connections out first (the exit handler, the _exit hook).
    local native shim p3=$(($1 + 70))
    for how in exit _exit; do
        bg env SOAK_CLOSE=$how soak server smc 127.0.0.1 $p3 > /tmp/soak.probe.nsrv.$how 2>&1
        wait_for /tmp/soak.probe.nsrv.$how listening 600 || fail "probe: the native soak server (SOAK_CLOSE=$how) did not listen: $(first "$(cat /tmp/soak.probe.nsrv.$how)")"
        soak client smc 127.0.0.1 $p3 -w 1 -n 1 -c late -b 96k > /tmp/soak.probe.n$how 2>&1
        bg env SOAK_CLOSE=$how smcrun soak server inet 127.0.0.1 $((p3 + 1)) > /tmp/soak.probe.ssrv.$how 2>&1
        wait_for /tmp/soak.probe.ssrv.$how listening 600 || fail "probe: the soak server under smcrun (SOAK_CLOSE=$how) did not listen: $(first "$(cat /tmp/soak.probe.ssrv.$how)")"
        soak client smc 127.0.0.1 $((p3 + 1)) -w 1 -n 1 -c late -b 96k > /tmp/soak.probe.s$how 2>&1
        cat /tmp/soak.probe.n$how /tmp/soak.probe.s$how
        native=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.n$how)
        shim=$(sed -n 's/.* failures=\([0-9]*\) .*/\1/p' /tmp/soak.probe.s$how)
        seen=no; [ "${native:-0}" -gt 0 ] && seen=seen
        echo "kernel probe: a server's $how right after writing 96 KiB (more than the peer's buffer takes), a reader 3 s late: the native server lost the tail in ${native:-?} of 1 ($seen), under smcrun in ${shim:-?} of 1"
        [ "$shim" = 0 ] || fail "under smcrun a server's $how lost data for a late reader (its unsent bytes were not let out first): $(grep -m1 '^soak: FAIL' /tmp/soak.probe.s$how | sed 's/^soak: //'; lastl "$(cat /tmp/soak.probe.s$how) $(cat /tmp/soak.probe.ssrv.$how)")"
        p3=$((p3 + 2))
    done
}

# soak: the integrity soak over SMC-R (soft-RoCE on lo, about 1 MB/s under TCG): sizes up to 256 KiB
#   and the Java echo's shape (4 concurrent echoes of 2 MiB)
check_soak() {
    soak_probe 7300
    soak_movers SMCR 7301 256k echo:2m,echo:2m,echo:2m,echo:2m
    ok
}

# smcd-soak: the same over SMC-D (loopback-ism): sizes up to 4 MiB, the Java echo's shape, and one
#   64 MiB stream each way (down, sink)
check_smcd_soak() {
    soak_probe 7310
    soak_movers SMCD 7311 4m echo:2m,echo:2m,echo:2m,echo:2m,down:64m,sink:64m
    ok
}

# shellcheck shell=dash
# The agent's checks (sourced by checks.sh): `smcrun agent` records every SMC socket from the
# kernel (kprobes on smc.ko), for programs under the preload and native AF_SMC programs alike.
# What the agent's state, `why --json`, `ps --all --json` and `demo --json` say is read by vmcheck
# (tests/vm/check), into the views' own types.
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2154

CHECK_LIMIT_agent=600
CHECK_LIMIT_smcd_agent=600

AGENT_STATE=/run/smcrun-agent/state.json

# agent_up: starts `smcrun agent`, waits until its state says attached
agent_up() {
    local o
    track smcrun agent --interval-ms 100 > /tmp/ag.log 2>&1
    AGENT_PID=$(tail -n1 /tmp/check.pids)
    o=$(vmcheck --wait 600 agent-attached) || fail "the agent did not attach: $(first "$(cat /tmp/ag.log)") $o"
}

# agent_pair NAME PORT N MODE ENV PREFIX [THREADS]: a server (serve-n) and a client (hammer, THREADS
# threads, default 8), N short connections, under PREFIX (empty, `smcrun` or `smcrun --bpf --`) with
# the environment ENV, each holding its process afterwards until fds 4 and 5, the fifos on their
# stdin, are closed. The fifos are opened read-write, which does not block: a blocking `exec 4>` was
# once interrupted by the SIGCHLD of the pair before ending ("can't create /tmp/X.sin: Interrupted
# system call"), which ended the check. Asserts the agent counted every connection of both in MODE
# (smcr, smcd or tcp): N, 0 of the other modes, 0 not seen, and `why --json` and `ps --all --json` say
# the same. Under the preload (a report in `why --json`), the report agrees with the agent: the
# same total and TCP, its SMC-R/SMC-D/"SMC, mode not read" together the agent's SMC, and neither
# SMC-R nor SMC-D above the agent's.
agent_pair() {
    local name=$1 p=$2 n=$3 mode=$4 env=$5 pre=$6 threads=${7:-8} spid cpid side pid o
    rm -f /tmp/$name.sin /tmp/$name.cin
    mkfifo /tmp/$name.sin /tmp/$name.cin
    sh -c "exec env SHAPES_HOLD=1 $env $pre shapes serve-n $p $n" < /tmp/$name.sin > /tmp/$name.srv 2>&1 &
    spid=$!
    echo $spid >> /tmp/check.pids
    exec 4<> /tmp/$name.sin
    wait_for /tmp/$name.srv '^listening=' 100 || fail "$name: the server did not listen: $(first "$(cat /tmp/$name.srv)")"
    sh -c "exec env SHAPES_HOLD=1 $env $pre shapes hammer 127.0.0.1:$p $n $threads" < /tmp/$name.cin > /tmp/$name.cli 2>&1 &
    cpid=$!
    echo $cpid >> /tmp/check.pids
    exec 5<> /tmp/$name.cin
    wait_for /tmp/$name.cli '^holding' 1200 || fail "$name: the client did not finish: $(first "$(cat /tmp/$name.cli)")"
    wait_for /tmp/$name.srv '^holding' 300 || fail "$name: the server did not finish: $(first "$(cat /tmp/$name.srv)")"
    grep -q "^made=$n failed=0" /tmp/$name.cli || fail "$name: the clients: $(first "$(cat /tmp/$name.cli)")"
    for side in client:$cpid server:$spid; do
        pid=${side#*:}
        side=${side%%:*}
        o=$(vmcheck --wait 50 agent-side $pid $side $mode $n) || fail "$name: $o; $(grep 'missed' /tmp/ag.log | tail -n1)"
        echo "$name $side (pid $pid): $o"
        # the views take the process and its modes from the agent
        o=$(vmcheck why-kernel $pid $side $mode $n) || fail "$name: $o"
        smcrun why $pid | grep -A3 '^kernel'
        o=$(vmcheck ps-kernel $pid $side $mode $n) || fail "$name: $o"
        # under the preload, its own report (written by its runtime on its own beat: until it
        # has all N) agrees with the agent; a program without the shim has none
        case $pre in
        smcrun) o=$(vmcheck --wait 100 why-report $pid $side $n) || fail "$name: $o"
            echo "$name $side (pid $pid): $o" ;;
        *) o=$(vmcheck why-no-report $pid) || fail "$name: $o" ;;
        esac
    done
    smcrun ps --all | tail -n 4
    AGENT_CPID=$cpid
    AGENT_SPID=$spid
}

# agent_lost [--missed-runs counted|not-counted]: nothing lost (the kernel maps' overflow, and the
# probes' missed runs where the kernel counts them, 6.7 and later; with the option, whether it must)
agent_lost() {
    local o
    o=$(vmcheck agent-lost-nothing "$@") || fail "$o"
    echo "$o"
}

# agent_three NAME PORT N MODE: agent_pair for a native AF_SMC program (no shim), the preload
# and BPF mode, on ports PORT, PORT+1 and PORT+2 (BPF mode set up by the caller)
agent_three() {
    agent_pair $1-native $2 $3 $4 SHAPES_FAMILY=smc ""
    exec 4>&- 5>&-
    agent_pair $1-preload $(($2 + 1)) $3 $4 "" smcrun
    exec 4>&- 5>&-
    agent_pair $1-bpf $(($2 + 2)) $3 $4 "" "smcrun --bpf --"
    exec 4>&- 5>&-
}

# agent: the agent attaches to smc.ko, classifies 500 short SMC-R connections of a native AF_SMC
#   program (no shim), 500 of the preload (whose own report agrees) and 500 in BPF mode on both
#   sides (0 "mode not seen"), its overflow counters (and missed probe runs) stay 0, and it follows
#   smc being unloaded and loaded again.
check_agent() {
    local o
    need_setup
    need_prog shapes
    smcrun agent --check || fail "smcrun agent --check says this kernel cannot run the agent"
    agent_up
    bpf_setup
    agent_three ag 7201 500 smcr
    agent_lost
    # smc goes: the agent does not hold it, says so, and attaches again when it is back.
    sleep 1
    smc_unload || fail "rmmod smc failed with the agent running: $(first "$(cat /tmp/smc.rmmod)")"
    vmcheck --wait 50 agent-detached > /dev/null || fail "the agent still says attached with smc unloaded"
    out=$(smc_reload) || fail "loading smc again: $out"
    o=$(vmcheck --wait 300 agent-attached --attachments 2) || fail "the agent did not attach again: $o"
    smcrun demo --json --connections 1 --bytes 64k > /tmp/ag.demo 2>&1 || fail "smcrun demo after the reload failed: $(lastl "$(cat /tmp/ag.demo)")"
    # (the first link group after a fresh load can time out confirming its QP under TCG: server
    # 0x02010000, the kernel's wait, as in ops-reload; the agent then rightly counts a TCP
    # connection; said, and one more connection, which must be SMC-R and counted)
    if vmcheck demo-fell-back /tmp/ag.demo server 0x02010000 > /dev/null; then
        echo "agent: the first link after the reload timed out confirming (0x02010000, the kernel's wait under TCG): one more demo"
        smcrun demo --json --connections 1 --bytes 64k > /tmp/ag.demo 2>&1 || fail "smcrun demo after the reload failed: $(lastl "$(cat /tmp/ag.demo)")"
    fi
    o=$(vmcheck --wait 50 agent-total client smcr 1501) ||
        fail "the demo's connection after the reload was not counted: $o"
    # the exporter's series from the agent
    smcrun metrics > /tmp/ag.prom 2>&1 || fail "smcrun metrics failed: $(first "$(cat /tmp/ag.prom)")"
    grep '^smcrun_agent_' /tmp/ag.prom | grep -v ' 0$' | head -n 20
    grep -q '^smcrun_agent_attached 1' /tmp/ag.prom || fail "no smcrun_agent_attached 1 in the metrics"
    n=$(grep '^smcrun_agent_connections_total{scope="program",name="shapes",role="client",mode="smcr"}' /tmp/ag.prom | awk '{print $2}')
    [ "$n" = 1500 ] || fail "smcrun_agent_connections_total for shapes' SMC-R clients is '$n', expected 1500"
    # the sockets collector takes the open sockets from the agent's summary: no smc_diag dump
    grep -q '^smcrun_agent_sockets{role="listen",mode="undecided"}' /tmp/ag.prom || fail "no smcrun_agent_sockets in the metrics: $(head -c 300 /run/smcrun-agent/summary.json 2>&1)"
    grep -q '^smc_sockets{' /tmp/ag.prom && fail "the metrics dumped smc_diag (smc_sockets) with the agent attached"
    # stopped, it takes its state away (the views then use today's sources)
    kill -TERM $AGENT_PID
    i=0
    while kill -0 $AGENT_PID 2> /dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -0 $AGENT_PID 2> /dev/null && fail "the agent did not stop on SIGTERM"
    [ -e $AGENT_STATE ] && fail "the agent left $AGENT_STATE behind when it stopped"
    [ -e /run/smcrun-agent/summary.json ] && fail "the agent left its summary.json behind when it stopped"
    cat /tmp/ag.log
    ok
}

# smcd-agent: on a kernel with smc built in (no smc.ko, no module BTF: its types in the kernel's),
#   `smcrun agent --check` passes and says so; the agent classifies 300 short SMC-D connections
#   each of a native AF_SMC program (no shim), of the preload (whose report agrees) and in BPF
#   mode, on both sides (0 not seen, 0 TCP), `why --json` and `ps --all --json` agree, nothing
#   lost (missed probe runs counted on these kernels: 0); then 100 connections from 32 client
#   threads blocked in recvmsg at once exhaust the kretprobe's 10 return instances: probes_missed
#   grows, and the received bytes left uncounted (client and server) are at most what it counts.
check_smcd_agent() {
    local o
    need_setup
    need_prog shapes
    [ -e /sys/module/smc/initstate ] && fail "smc is a module here: smcd-agent is for a kernel with smc built in"
    o=$(smcrun agent --check) || fail "smcrun agent --check says this kernel cannot run the agent: $o"
    echo "$o"
    case $o in *"smc built in"*"missed probe runs counted"*) ;; *) fail "smcrun agent --check does not say smc is built in and missed runs counted: $o" ;; esac
    bpf_setup
    agent_up
    agent_three sag 7211 300 smcd
    agent_lost --missed-runs counted
    o=$(vmcheck agent-attached --attachments 1) || fail "the agent attached more than once to a built-in smc: $o"
    smcrun metrics > /tmp/sag.prom 2>&1 || fail "smcrun metrics failed: $(first "$(cat /tmp/sag.prom)")"
    grep -q '^smcrun_agent_lost_total{what="probes_missed"} 0' /tmp/sag.prom || fail "no smcrun_agent_lost_total{what=\"probes_missed\"} 0 in the metrics: $(grep '^smcrun_agent_lost' /tmp/sag.prom)"
    n=$(grep '^smcrun_agent_connections_total{scope="program",name="shapes",role="server",mode="smcd"}' /tmp/sag.prom | awk '{print $2}')
    [ "$n" = 900 ] || fail "smcrun_agent_connections_total for shapes' SMC-D servers is '$n', expected 900"
    # missed probe runs are counted, not silent: 32 client threads blocked in recvmsg at once while
    # the one-at-a-time server answers outnumber the kretprobe's return instances (max(10, 2 x
    # CPUs): 10 on this 2-CPU VM), so receives go uncounted; each is a missed run, counted
    agent_pair sag-missed 7214 100 smcd SHAPES_FAMILY=smc "" 32
    exec 4>&- 5>&-
    o=$(vmcheck agent-missed $AGENT_CPID $AGENT_SPID) || fail "smcd-agent: $o"
    set -- $o
    echo "smcd-agent: 100 connections from 32 threads: probes_missed $1, received bytes counted: client $2 of 100, server $3 of 100"
    [ "$1" -gt 0 ] || fail "32 receives blocked at once missed no kretprobe run (10 instances on 2 CPUs): probes_missed $1, client rx $2"
    [ $((200 - $2 - $3)) -le "$1" ] || fail "received bytes uncounted (client $2 of 100, server $3 of 100) outnumber the missed probe runs counted ($1): lost silently"
    kill -TERM $AGENT_PID
    ok
}

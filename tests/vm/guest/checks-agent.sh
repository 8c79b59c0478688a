# shellcheck shell=dash
# The agent's checks (sourced by checks.sh): `smcrun agent` records every SMC socket from the
# kernel (kprobes on smc.ko), for programs under the preload and native AF_SMC programs alike.
#
# shellcheck disable=SC2015,SC2086,SC2016,SC2154

CHECK_LIMIT_agent=400

AGENT_STATE=/run/smcrun-agent/state.json

# agent_up: starts `smcrun agent`, waits until its state says attached
agent_up() {
    track smcrun agent --interval-ms 100 > /tmp/ag.log 2>&1
    AGENT_PID=$(tail -n1 /tmp/check.pids)
    agent_wait '.attached == true' 600 || fail "the agent did not attach: $(first "$(cat /tmp/ag.log)") $(jq -c '{attached, error}' $AGENT_STATE 2>&1)"
}

# agent_wait JQ [TENTHS]: until the state file satisfies JQ
agent_wait() {
    local i=0 max=${2:-100}
    while ! jq -e "$1" $AGENT_STATE > /dev/null 2>&1; do
        [ $i -ge $max ] && return 1
        sleep 0.1
        i=$((i + 1))
    done
}

# agent_pair NAME PORT ENV PREFIX: a server (serve-n) and a client (hammer, 8 threads), 500 short
# connections, under PREFIX (empty, or smcrun) with the environment ENV, each holding its process
# afterwards; asserts the agent counted every connection of both by mode: 500 SMC-R, 0 not seen.
agent_pair() {
    local name=$1 p=$2 env=$3 pre=$4 spid cpid side pid q
    rm -f /tmp/$name.sin /tmp/$name.cin
    mkfifo /tmp/$name.sin /tmp/$name.cin
    sh -c "exec env SHAPES_HOLD=1 $env $pre shapes serve-n $p 500" < /tmp/$name.sin > /tmp/$name.srv 2>&1 &
    spid=$!
    echo $spid >> /tmp/check.pids
    exec 4> /tmp/$name.sin
    wait_for /tmp/$name.srv '^listening=' 100 || fail "$name: the server did not listen: $(first "$(cat /tmp/$name.srv)")"
    sh -c "exec env SHAPES_HOLD=1 $env $pre shapes hammer 127.0.0.1:$p 500 8" < /tmp/$name.cin > /tmp/$name.cli 2>&1 &
    cpid=$!
    echo $cpid >> /tmp/check.pids
    exec 5> /tmp/$name.cin
    wait_for /tmp/$name.cli '^holding' 1200 || fail "$name: the client did not finish: $(first "$(cat /tmp/$name.cli)")"
    wait_for /tmp/$name.srv '^holding' 300 || fail "$name: the server did not finish: $(first "$(cat /tmp/$name.srv)")"
    grep -q '^made=500 failed=0' /tmp/$name.cli || fail "$name: the clients: $(first "$(cat /tmp/$name.cli)")"
    for side in client:$cpid server:$spid; do
        pid=${side#*:}
        side=${side%%:*}
        q=".processes[] | select(.pid == $pid) | .sides.$side"
        agent_wait "[$q | .smcr] == [500]" 50 ||
            fail "$name: the agent counted for the $side (pid $pid): $(jq -c "[$q]" $AGENT_STATE)"
        [ "$(jq "[$q | .not_seen, .tcp, .smcd] | add" $AGENT_STATE)" = 0 ] ||
            fail "$name: the $side has connections not SMC-R: $(jq -c "[$q]" $AGENT_STATE)"
        echo "$name $side (pid $pid): $(jq -c "$q | {smcr, smcd, tcp, not_seen, tx_bytes, rx_bytes}" $AGENT_STATE)"
        # the views take the process and its modes from the agent
        smcrun why $pid --json > /tmp/$name.why 2>&1 || fail "$name: smcrun why $pid failed: $(first "$(cat /tmp/$name.why)")"
        [ "$(jq ".kernel.sides.$side.smcr" /tmp/$name.why)" = 500 ] || fail "$name: smcrun why $pid --json: $(head -c 300 /tmp/$name.why)"
        smcrun why $pid | grep -A3 '^kernel'
        smcrun ps --all --json > /tmp/$name.ps 2>&1 || fail "$name: smcrun ps --all failed: $(first "$(cat /tmp/$name.ps)")"
        [ "$(jq "[.smc_processes[] | select(.pid == $pid) | .kernel.$side.smcr]" -c /tmp/$name.ps)" = "[500]" ] ||
            fail "$name: ps --all --json does not count 500 SMC-R for pid $pid: $(jq -c "[.smc_processes[] | select(.pid == $pid)]" /tmp/$name.ps)"
    done
    smcrun ps --all | tail -n 4
    AGENT_CPID=$cpid
    AGENT_SPID=$spid
}

# agent: the agent attaches to smc.ko, classifies 500 short SMC-R connections of a native AF_SMC
#   program (no shim) and 500 of the preload on both sides (0 "mode not seen"), its overflow
#   counters stay 0, and it follows smc being unloaded and loaded again.
check_agent() {
    need_setup
    need_prog shapes
    smcrun agent --check || fail "smcrun agent --check says this kernel cannot run the agent"
    agent_up
    agent_pair ag-native 7201 SHAPES_FAMILY=smc ""
    agent_pair ag-preload 7202 "" smcrun
    exec 4>&- 5>&-
    jq -c .overflow $AGENT_STATE
    jq -e '.overflow | .live_full + .done_full + .inflight_full == 0' $AGENT_STATE > /dev/null ||
        fail "the agent lost records: $(jq -c .overflow $AGENT_STATE)"
    # smc goes: the agent does not hold it, says so, and attaches again when it is back.
    sleep 1
    smc_unload || fail "rmmod smc failed with the agent running: $(first "$(cat /tmp/smc.rmmod)")"
    agent_wait '.attached == false' 50 || fail "the agent still says attached with smc unloaded"
    out=$(smc_reload) || fail "loading smc again: $out"
    agent_wait '.attached == true and .attachments == 2' 300 || fail "the agent did not attach again: $(jq -c '{attached, error, attachments}' $AGENT_STATE)"
    smcrun demo --json --connections 1 --bytes 64k > /tmp/ag.demo 2>&1 || fail "smcrun demo after the reload failed: $(lastl "$(cat /tmp/ag.demo)")"
    # (the first link group after a fresh load can time out confirming its QP under TCG: server
    # 0x02010000, the kernel's wait, as in ops-reload; the agent then rightly counts a TCP
    # connection; said, and one more connection, which must be SMC-R and counted)
    if jq -e '[.sockets[] | select(.side == "server" and .fallback_reason == "0x02010000")] | length > 0' /tmp/ag.demo > /dev/null 2>&1; then
        echo "agent: the first link after the reload timed out confirming (0x02010000, the kernel's wait under TCG): one more demo"
        smcrun demo --json --connections 1 --bytes 64k > /tmp/ag.demo 2>&1 || fail "smcrun demo after the reload failed: $(lastl "$(cat /tmp/ag.demo)")"
    fi
    agent_wait '.total.client.smcr >= 1001' 50 ||
        fail "the demo's connection after the reload was not counted: $(jq -c .total.client $AGENT_STATE)"
    # the exporter's series from the agent
    smcrun metrics > /tmp/ag.prom 2>&1 || fail "smcrun metrics failed: $(first "$(cat /tmp/ag.prom)")"
    grep '^smcrun_agent_' /tmp/ag.prom | grep -v ' 0$' | head -n 20
    grep -q '^smcrun_agent_attached 1' /tmp/ag.prom || fail "no smcrun_agent_attached 1 in the metrics"
    n=$(grep '^smcrun_agent_connections_total{scope="program",name="shapes",role="client",mode="smcr"}' /tmp/ag.prom | awk '{print $2}')
    [ "$n" = 1000 ] || fail "smcrun_agent_connections_total for shapes' SMC-R clients is '$n', expected 1000"
    # the sockets collector takes the open sockets from the agent's summary: no smc_diag dump
    grep -q '^smcrun_agent_sockets{role="listen",mode="undecided"}' /tmp/ag.prom || fail "no smcrun_agent_sockets in the metrics: $(jq -c '{attached, census_netns}' /run/smcrun-agent/summary.json 2>&1)"
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

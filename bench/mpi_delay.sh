#!/bin/sh
# Decode latency of expert parallelism against the link delay, on one
# machine: each MPI rank runs in its own network namespace (a "host"), and
# the namespaces reach each other only through tools/delaylink.c, a
# user-space router that holds every IP packet a fixed one-way delay (this
# VM's kernel has no sch_netem for `tc ... netem`). mpirun starts in
# namespace 0 and launches the other ranks' daemons through an "rsh agent"
# that is `ip netns exec`; Open MPI's TCP transport and its out-of-band
# channel are bound to the link device dl0, so every byte between ranks
# crosses the delay.
#
# Per repeat, per delay (interleaved): the link's own round trip measured by
# a TCP ping-pong between namespaces 0 and 1 (64 bytes, TCP_NODELAY), the
# single-process bench, then the NP-rank bench through the link; and the
# link's report (packets, drops, how late they left). Last, a table of the
# medians (bench/mpi_delay_table.py): decode ms/token single and on NP ranks,
# rank 0's layer exchanges per token, the bound = single + exchanges x RTT.
#
# Each "host" has one slot, so Open MPI would neither see the
# oversubscription nor yield; all ranks share this machine's cores, so the
# script binds no rank to a core (--bind-to none: every daemon would bind its
# rank to core 0) and makes idle ranks yield (mpi_yield_when_idle), as
# `mpirun --oversubscribe` does by itself on one host.
#   sh bench/mpi_delay.sh [MODEL [NP [DELAYS_US [REPEATS [BENCH_ARGS...]]]]]
# Needs root (ip netns, TUN), python3, and a make MPI=1 build in build/mpi.
# Uses only the namespaces and the 10.77.0.0/24 addresses it creates inside them.
set -eu
model=${1:-models/colibri-tiny}; np=${2:-3}; delays=${3:-"0 50 200"}; repeats=${4:-3}
[ $# -gt 4 ] && shift 4 || set --
[ $# -gt 0 ] || set -- -p 16 -n 64 -r 3 -t 1
colibri=build/mpi/colibri
[ -x "$colibri" ] || { echo "no $colibri: make -j2 MPI=1 first"; exit 1; }
mkdir -p build/mpi/tools
cc -std=c11 -O2 -Wall -Wextra -o build/mpi/tools/delaylink tools/delaylink.c
tmp=$(mktemp -d)
link_pid=""
nss=""
cleanup() {
    [ -z "$link_pid" ] || kill "$link_pid" 2>/dev/null || true
    for n in $nss; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# the namespaces and the agent that starts a command "on host ADDR"
ends=""; hosts=""; i=0
while [ $i -lt "$np" ]; do
    n=colibri-dl$i.$$
    ip netns add "$n"
    nss="$nss $n"
    ip netns exec "$n" ip link set lo up
    ends="$ends $n=10.77.0.$((i + 1))/24"
    hosts="$hosts 10.77.0.$((i + 1))=$n"
    echo "10.77.0.$((i + 1)) slots=1" >>"$tmp/hostfile"
    i=$((i + 1))
done
ns0=colibri-dl0.$$
cat >"$tmp/agent" <<EOF
#!/bin/sh
# Open MPI's rsh agent: \$1 is the host, the rest a command line for its shell
ns=""
for pair in $hosts; do [ "\${pair%%=*}" = "\$1" ] && ns=\${pair#*=}; done
[ -n "\$ns" ] || { echo "agent: no namespace for host '\$1'" >&2; exit 1; }
shift
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$tmp/agent"
cat >"$tmp/pingpong.py" <<'EOF'
import socket, statistics, sys, time
role, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, port)); s.listen(1)
    print("listening", flush=True)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(64)
        if not b: break
        c.sendall(b)
else:
    n = int(sys.argv[4]); c = socket.create_connection((host, port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = []
    for i in range(n):
        t = time.perf_counter(); c.sendall(b"x" * 64); got = 0
        while got < 64: got += len(c.recv(64 - got))
        rtt.append((time.perf_counter() - t) * 1e6)
    rtt = sorted(rtt[n // 10:])
    print("link rtt us: median %.0f p10 %.0f p90 %.0f" % (statistics.median(rtt), rtt[len(rtt) // 10],
                                                           rtt[len(rtt) * 9 // 10]))
EOF

# The link runs at real-time priority (it sleeps between packets and spins at
# most --spin-us before each): on a busy machine an ordinary process wakes
# milliseconds late, and the link would add that to every packet, as no
# network card does. The ranks run at normal priority.
rt=""
command -v chrt >/dev/null && rt="chrt -f 1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "machine: $(uptime)"
echo "model: $model, bench args: $*"
rep=1
while [ $rep -le "$repeats" ]; do
    for d in $delays; do
        # shellcheck disable=SC2086
        $rt build/mpi/tools/delaylink --delay-us "$d" --seconds 600 $ends >"$tmp/link.log" 2>&1 &
        link_pid=$!
        i=0
        until grep -q ready "$tmp/link.log"; do
            i=$((i + 1)); [ $i -lt 100 ] || { cat "$tmp/link.log"; exit 1; }; sleep 0.05
        done
        echo "== repeat $rep, one-way delay $d us, $np ranks"
        echo "repeat $rep, delay $d us ($(date -u +%T))" >&2
        : >"$tmp/pp.log"
        ip netns exec colibri-dl1.$$ python3 "$tmp/pingpong.py" server 10.77.0.2 7700 >"$tmp/pp.log" &
        until grep -q listening "$tmp/pp.log"; do sleep 0.05; done
        ip netns exec "$ns0" python3 "$tmp/pingpong.py" client 10.77.0.2 7700 2000
        wait $!
        printf "single process: "
        "$colibri" bench -m "$model" "$@" 2>&1 | grep "^model=" | sed 's/.*decode=/decode=/'
        ip netns exec "$ns0" mpirun -np "$np" --hostfile "$tmp/hostfile" --mca plm_rsh_agent "$tmp/agent" \
            --mca plm_rsh_no_tree_spawn 1 --bind-to none --mca mpi_yield_when_idle 1 \
            --mca oob_tcp_if_include dl0 --mca btl tcp,self \
            --mca btl_tcp_if_include dl0 "$colibri" bench -m "$model" "$@" --mpi 2>&1 |
            grep -E "^(model=|mpi rank)" | sed 's/^model=.*decode=/mpi: decode=/'
        kill "$link_pid"; wait "$link_pid" || true; link_pid=""
        grep "^delaylink:" "$tmp/link.log"
    done >>"$tmp/all.log" 2>&1
    rep=$((rep + 1))
done
cat "$tmp/all.log"
python3 bench/mpi_delay_table.py "$tmp/all.log"

#!/usr/bin/env bash
# The cost of the data path's hook seams with nothing attached (docs/datapath.md, "Hooks"):
# two datapath_bench binaries (before: BASE, after: NEW) run in interleaved rounds of the 64 B
# polling ping-pong and the 1 MiB Send stream; prints each round's NEW/BASE ratio and their
# medians. A ratio is taken within one round, so drift of the machine between rounds cancels.
#
#   bench/hooks_cost.sh BASE_datapath_bench NEW_datapath_bench [ROUNDS] [SECONDS_PER_CASE]
set -euo pipefail
base=$1 new=$2 rounds=${3:-10} secs=${4:-1.0}
run() { "$1" -q -t "$secs" | awk '/ping-pong one-way, polling/ {lat=$6} /1 MiB Send stream/ {bw=$5}
                                   END {print lat, bw}'; }
lat_r=() bw_r=()
for ((i = 1; i <= rounds; i++)); do
    if ((i % 2)); then read -r bl bb < <(run "$base"); read -r nl nb < <(run "$new")
    else read -r nl nb < <(run "$new"); read -r bl bb < <(run "$base"); fi
    lr=$(awk -v a="$nl" -v b="$bl" 'BEGIN {printf "%.4f", a / b}')
    br=$(awk -v a="$nb" -v b="$bb" 'BEGIN {printf "%.4f", a / b}')
    printf 'round %2d  64 B latency %6s us -> %6s us (%s)   1 MiB %5s -> %5s GB/s (%s)\n' \
        "$i" "$bl" "$nl" "$lr" "$bb" "$nb" "$br"
    lat_r+=("$lr") bw_r+=("$br")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "median NEW/BASE: 64 B latency $(median "${lat_r[@]}") (lower is better)," \
     "1 MiB bandwidth $(median "${bw_r[@]}") (higher is better)"

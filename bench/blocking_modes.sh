#!/usr/bin/env bash
# The blocking 64 B latency's distribution by progress-thread spin window (docs/datapath.md,
# "Blocking latency"): interleaved rounds of `ndkperf --loopback send_lat -s 64 -e --histogram`,
# one run per spin setting per round. Prints each run's median, 99th percentile, the share of
# samples at 20 us or more and how idle the machine was meanwhile (CPU time from /proc/stat),
# then each setting's histogram summed over the rounds (1 us buckets).
#
#   bench/blocking_modes.sh NDKPERF [ROUNDS] [ITERS] [SPIN_US ...]   (default spins: 0 10 50 200)
set -euo pipefail
ndkperf=$1 rounds=${2:-4} iters=${3:-3000}
shift $(($# < 3 ? $# : 3))
spins=("$@")
((${#spins[@]})) || spins=(0 10 50 200)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
idle_ticks() { awk '/^cpu / {print $5 + $6}' /proc/stat; }
cpus=$(nproc)
hz=$(getconf CLK_TCK)
for ((r = 1; r <= rounds; r++)); do
    for s in "${spins[@]}"; do
        i0=$(idle_ticks) t0=$(date +%s%N)
        SOFTNDK_SPIN_US=$s timeout 60 "$ndkperf" send_lat --loopback -s 64 -e -n "$iters" \
            --histogram >"$tmp/out" 2>&1
        i1=$(idle_ticks) t1=$(date +%s%N)
        idle=$(awk -v i="$((i1 - i0))" -v t="$((t1 - t0))" -v c="$cpus" -v hz="$hz" \
            'BEGIN {printf "%.0f", 100 * i / hz / (t / 1e9) / c}')
        awk -v r="$r" -v s="$s" -v idle="$idle" '
            /^hist/ {n += $4; if ($2 + 0 >= 20) slow += $4}
            /^ *64 / {med = $5; p99 = $8}
            END {printf "round %2d  spin %4s us  median %6s us  p99 %7s us  >=20 us %5.1f %%  idle %3s %%\n",
                        r, s, med, p99, n ? 100 * slow / n : 0, idle}' "$tmp/out"
        awk '/^hist/ {print $2, $4}' "$tmp/out" >>"$tmp/hist.$s"
    done
done
for s in "${spins[@]}"; do
    printf '\nspin %s us, %d rounds x %d samples: us count\n' "$s" "$rounds" "$iters"
    awk '{c[$1 + 0] += $2} END {for (b in c) print b, c[b]}' "$tmp/hist.$s" | sort -n |
        awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $1, $2} END {print ""}'
done

#!/usr/bin/env bash
# bench.sh — regenerate the table of the README's "Performance" section.
#
# Usage (from anywhere in the repository, as root on Linux with cgroups, as
# the tests need a safety cgroup for the kill benchmark):
#
#     integration/bench.sh            # the full run (about 10 minutes on 2 cores)
#     BENCH_SHORT=1 integration/bench.sh   # a smoke run: small floods, one iteration
#
# It runs, in one go on this machine, the benchmarks of package integration
# (corral the library, os/exec into io.Discard, os/exec into a bytes.Buffer,
# corral serve over HTTP) and of the separate module integration/peers
# (github.com/go-cmd/cmd), then prints a markdown table with ratios against
# plain os/exec draining into io.Discard, and the machine it ran on. The raw
# `go test -bench` output is kept in $BENCH_RAW (default: a temporary file,
# whose path is printed).
#
# What is measured (see integration/bench_test.go and internal/benchkit):
#   throughput  `head -c 2G /dev/zero` drained to the end (MB/s; buffering
#               contenders at 1 GiB, since they hold it all in memory)
#   peak RSS    VmHWM of a child process running one contender on a 4 GiB
#               flood (buffering contenders: 1 GiB)
#   true        one whole call running `true` (µs)
#   kill tree   a 1,000-process tree, 499 of them setsid'd, stopped the
#               contender's way inside a safety cgroup: time from the stop to
#               the call returning (hung when not within 5 s), and how many of
#               the tree's processes were still alive then
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
raw=${BENCH_RAW:-$(mktemp -t corral-bench.XXXXXX)}
: >"$raw"

short=()
heavy=(-benchtime 3x)
light=(-benchtime 2s)
kill=(-benchtime 3x)
if [[ ${BENCH_SHORT:-} == 1 ]]; then
	short=(-short)
	heavy=(-benchtime 1x)
	light=(-benchtime 20x)
	kill=(-benchtime 1x)
fi

bench() { # dir pattern benchtime...
	local dir=$1 pat=$2
	shift 2
	(cd "$dir" && go test "${short[@]}" -run '^$' -bench "$pat" "$@" -timeout 60m .) | tee -a "$raw" >&2
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for dir in "$here" "$here/peers"; do
	bench "$dir" '^BenchmarkTrue$' "${light[@]}"
	bench "$dir" '^Benchmark(Throughput|PeakRSS)$' "${heavy[@]}"
	bench "$dir" '^BenchmarkKillTree$' "${kill[@]}"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mem=$(free -h | awk '/^Mem:/ {print $2}')
echo "Raw output: $raw" >&2

awk -v cpu="$cpu" -v ncpu="$(nproc)" -v mem="$mem" -v kernel="$(uname -r)" \
	-v gover="$(go env GOVERSION)" -v date="$(date -u +%Y-%m-%d)" \
	-v load="$load_before → $load_after" '
# A result line: BenchmarkName/contender-P  N  value unit  value unit ...
/^Benchmark[A-Za-z]+\/[a-z-]+-[0-9]+[ \t]/ {
	split($1, parts, "/")
	name = parts[1]; sub(/^Benchmark/, "", name)
	c = parts[2]; sub(/-[0-9]+$/, "", c)
	for (i = 3; i + 1 <= NF; i += 2) v[name, c, $(i + 1)] = $i
	seen[name, c] = 1
}
function has(name, c) { return ((name, c) in seen) }
function fmtnum(x) {
	if (x >= 100) return sprintf("%.0f", x)
	if (x >= 10) return sprintf("%.1f", x)
	return sprintf("%.2f", x)
}
# cell prints value with its ratio to the os/exec io.Discard baseline.
function cell(x, base, note) {
	if (base > 0) return fmtnum(x) note " (" sprintf("%.2f", x / base) "×)"
	return fmtnum(x) note
}
function flood(name, c,   m) {
	m = v[name, c, "flood-MiB"]
	if (m == "" || m + 0 >= 2048) return ""
	return " @ " (m >= 1024 ? sprintf("%g GiB", m / 1024) : sprintf("%g MiB", m))
}
END {
	n = split("corral exec-discard exec-buffer go-cmd server", cs, " ")
	label["corral"] = "corral (library)"; label["exec-discard"] = "os/exec → io.Discard"
	label["exec-buffer"] = "os/exec → bytes.Buffer"; label["go-cmd"] = "go-cmd/cmd v1.4.4"
	label["server"] = "corral serve (HTTP)"
	printf "| | "; for (i = 1; i <= n; i++) printf "%s | ", label[cs[i]]; print ""
	printf "|---|"; for (i = 1; i <= n; i++) printf "---|"; print ""

	printf "| Throughput, 2 GiB flood (MB/s) | "
	base = v["Throughput", "exec-discard", "MB/s"]
	for (i = 1; i <= n; i++) { c = cs[i]
		printf "%s | ", has("Throughput", c) ? cell(v["Throughput", c, "MB/s"], base, flood("Throughput", c)) : "—" }
	print ""

	printf "| Peak RSS, 4 GiB flood (MB) | "
	base = v["PeakRSS", "exec-discard", "peak-MB"]
	for (i = 1; i <= n; i++) { c = cs[i]
		printf "%s | ", has("PeakRSS", c) ? cell(v["PeakRSS", c, "peak-MB"], base, flood("PeakRSS", c)) : "—" }
	print ""

	printf "| Overhead on `true` (µs per call) | "
	base = v["True", "exec-discard", "ns/op"] / 1000
	for (i = 1; i <= n; i++) { c = cs[i]
		printf "%s | ", has("True", c) ? cell(v["True", c, "ns/op"] / 1000, base, "") : "—" }
	print ""

	printf "| Kill a 1,000-process tree (499 setsid): stop → return (ms) | "
	for (i = 1; i <= n; i++) { c = cs[i]
		if (!has("KillTree", c)) { printf "— | "; continue }
		if (v["KillTree", c, "hung"] + 0 > 0) printf "hung (> 5 s) | "
		else printf "%s | ", fmtnum(v["KillTree", c, "stop-ms"]) }
	print ""

	printf "| … processes of that tree left alive | "
	for (i = 1; i <= n; i++) { c = cs[i]
		printf "%s | ", has("KillTree", c) ? sprintf("%.0f", v["KillTree", c, "survivors"]) : "—" }
	print ""

	print ""
	printf "Ratios are against os/exec draining into io.Discard. Idle floor of the peak-RSS child: %s MB.\n", fmtnum(v["PeakRSS", "idle", "peak-MB"])
	printf "Measured %s on %s (nproc %s), %s RAM, Linux %s, %s; load average (1, 5, 15 min) before → after: %s.\n", date, cpu, ncpu, mem, kernel, gover, load
	print "Reproduce with `integration/bench.sh` (see the script for what each row measures)."
}' "$raw"

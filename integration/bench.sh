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
#               contenders at 1 GiB, since they hold it all in memory); the
#               contenders run in turn within each iteration
#   peak RSS    VmHWM of a child process running one contender on a 4 GiB
#               flood (buffering contenders: 1 GiB)
#   true        one whole call running `true` (µs), contenders in turn
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
light=(-benchtime 300x)
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
/^pkg:/ { pkg = ($2 ~ /\/peers$/) ? "peers" : "main" }
# A result line: BenchmarkName[/contender]-P  N  value unit  value unit ...
/^Benchmark[A-Za-z]+(\/[a-z-]+)?-[0-9]+[ \t]/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	c = ""
	if (index(name, "/")) { c = substr(name, index(name, "/") + 1); name = substr(name, 1, index(name, "/") - 1) }
	for (i = 3; i + 1 <= NF; i += 2) v[pkg, name, c, $(i + 1)] = $i
}
function fmtnum(x) {
	if (x >= 100) return sprintf("%.0f", x)
	if (x >= 10) return sprintf("%.1f", x)
	return sprintf("%.2f", x)
}
function size(m) {
	if (m == "" || m + 0 >= 2048) return ""
	return " @ " (m >= 1024 ? sprintf("%g GiB", m / 1024) : sprintf("%g MiB", m))
}
# cell is a value with its ratio to base.
function cell(x, base, note) {
	if (x == "") return "—"
	if (base > 0) return fmtnum(x) note " (" sprintf("%.2f", x / base) "×)"
	return fmtnum(x) note
}
function modof(c) { return c == "go-cmd" ? "peers" : "main" }
# paired is a cell of a paired benchmark (Throughput, True): the ratio is
# against the os/exec io.Discard run of the same loop in the same module.
function paired(name, c, unit,   p) {
	p = modof(c)
	return cell(v[p, name, "", c "-" unit], v[p, name, "", "exec-discard-" unit], size(v[p, name, "", c "-MiB"]))
}
END {
	n = split("corral exec-discard exec-buffer go-cmd server", cs, " ")
	label["corral"] = "corral (library)"; label["exec-discard"] = "os/exec → io.Discard"
	label["exec-buffer"] = "os/exec → bytes.Buffer"; label["go-cmd"] = "go-cmd/cmd v1.4.4"
	label["server"] = "corral serve (HTTP)"
	printf "| | "; for (i = 1; i <= n; i++) printf "%s | ", label[cs[i]]; print ""
	printf "|---|"; for (i = 1; i <= n; i++) printf "---|"; print ""

	printf "| Throughput, 2 GiB flood (MB/s) | "
	for (i = 1; i <= n; i++) printf "%s | ", paired("Throughput", cs[i], "MB/s")
	print ""

	printf "| Overhead on `true` (µs per call) | "
	for (i = 1; i <= n; i++) printf "%s | ", paired("True", cs[i], "µs")
	print ""

	printf "| Peak RSS, 4 GiB flood (MB) | "
	base = v["main", "PeakRSS", "exec-discard", "peak-MB"]
	for (i = 1; i <= n; i++) { c = cs[i]; p = modof(c)
		printf "%s | ", cell(v[p, "PeakRSS", c, "peak-MB"], base, size(v[p, "PeakRSS", c, "flood-MiB"])) }
	print ""

	printf "| Kill a 1,000-process tree (499 setsid): stop → return (ms) | "
	for (i = 1; i <= n; i++) { c = cs[i]; p = modof(c)
		if (v[p, "KillTree", c, "stop-ms"] == "") printf "— | "
		else if (v[p, "KillTree", c, "hung"] + 0 > 0) printf "hung (> 5 s) | "
		else printf "%s | ", fmtnum(v[p, "KillTree", c, "stop-ms"]) }
	print ""

	printf "| … processes of that tree left alive | "
	for (i = 1; i <= n; i++) { c = cs[i]; p = modof(c); x = v[p, "KillTree", c, "survivors"]
		printf "%s | ", x == "" ? "—" : sprintf("%.0f", x) }
	print ""

	print ""
	print "Throughput and `true`: every contender runs in turn in each iteration, and the ratio is against the os/exec io.Discard run of the same loop (go-cmd: the one in its own module), so a noisy machine slows all of them alike. Peak RSS: ratio against os/exec io.Discard."
	printf "Idle floor of the peak-RSS child: %s MB.\n", fmtnum(v["main", "PeakRSS", "idle", "peak-MB"])
	printf "Measured %s on %s (nproc %s), %s RAM, Linux %s, %s; load average (1, 5, 15 min) before → after: %s.\n", date, cpu, ncpu, mem, kernel, gover, load
	print "Reproduce with `integration/bench.sh` (see the script for what each row measures)."
}' "$raw"

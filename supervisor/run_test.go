package supervisor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/killtree"
)

func intp(n int) *int { return &n }

func TestRunExitAndOutput(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	tests := []struct {
		name    string
		command string
		code    *int
		signal  string
		stdout  string
		stderr  string
	}{
		// Plain success with stdout only.
		{"exit0", "echo hello", intp(0), "", "hello\n", ""},
		// A failing command's code is reported as is.
		{"exit1", "echo oops >&2; exit 1", intp(1), "", "", "oops\n"},
		// The largest exit code.
		{"exit255", "exit 255", intp(255), "", "", ""},
		// Death by signal: exitCode null, signal named.
		{"signal", "exec env " + proctest.Command("killself", "9"), nil, "SIGKILL", "", ""},
		// stderr only.
		{"stderr", "printf 'warn\\n' >&2", intp(0), "", "", "warn\n"},
		// Interleaved writes keep each stream's order.
		{"interleaved", "for i in 1 2 3; do echo o$i; echo e$i >&2; done", intp(0), "", "o1\no2\no3\n", "e1\ne2\ne3\n"},
		// No output at all.
		{"silent", "true", intp(0), "", "", ""},
		// stdin is /dev/null: cat returns at once, read fails.
		{"stdin-null", "cat; read x; echo rc=$?", intp(0), "", "rc=1\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := run(t, s, Request{Command: tc.command})
			if diff := cmp.Diff(tc.code, res.ExitCode); diff != "" {
				t.Errorf("exitCode (-want +got):\n%s", diff)
			}
			if res.Signal != tc.signal || res.Stdout != tc.stdout || res.Stderr != tc.stderr {
				t.Errorf("got signal %q stdout %q stderr %q, want %q %q %q",
					res.Signal, res.Stdout, res.Stderr, tc.signal, tc.stdout, tc.stderr)
			}
			if res.TimedOut || res.Aborted || res.Truncated {
				t.Errorf("timedOut %v aborted %v truncated %v", res.TimedOut, res.Aborted, res.Truncated)
			}
			if res.Kill.Tier == "" {
				t.Error("kill.tier is empty")
			}
		})
	}
}

func TestRunStdinBytes(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	res := run(t, s, Request{Command: "read name; echo hello $name", Stdin: []byte("corral\n")})
	if res.Stdout != "hello corral\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Setenv("CORRAL_TEST_SECRET", "s3cret")
	t.Setenv("CORRAL_TEST_INHERITED", "inherited")
	t.Setenv("PAGER", "less")
	s := newSup(t, Config{Scrub: []string{"CORRAL_TEST_SECRET"}})
	res := run(t, s, Request{
		Command: `echo "$CORRAL_TEST_INHERITED|${CORRAL_TEST_SECRET-unset}|$FOO|${HOME-unset}|$PAGER|$GIT_TERMINAL_PROMPT|$EDITOR|${CORRAL_RUN_ID:+id}"`,
		Env:     map[string]string{"FOO": "bar", "CORRAL_TEST_SECRET": "via-request"},
		Unset:   []string{"HOME"},
	})
	if want := "inherited|unset|bar|unset|cat|0|true|id\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
	// The request may override prompt suppression.
	res = run(t, s, Request{Command: `echo $PAGER`, Env: map[string]string{"PAGER": "more"}})
	if res.Stdout != "more\n" {
		t.Errorf("override: stdout %q", res.Stdout)
	}
}

func TestRunInvalid(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	dir := t.TempDir()
	proof := filepath.Join(dir, "started")
	touch := "touch " + proof
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	tests := []struct {
		name string
		req  Request
	}{
		// Empty and blank commands.
		{"empty", Request{Command: ""}},
		{"blank", Request{Command: "  \n"}},
		// A NUL byte cannot reach exec.
		{"nul", Request{Command: touch + "\x00"}},
		// Negative, below the minimum, above the maximum.
		{"negative", Request{Command: touch, Timeout: -time.Second}},
		{"half-second", Request{Command: touch, Timeout: 500 * time.Millisecond}},
		{"301s", Request{Command: touch, Timeout: 301 * time.Second}},
		{"300.5s", Request{Command: touch, Timeout: 300500 * time.Millisecond}},
		// The working directory must exist and be a directory.
		{"cwd-missing", Request{Command: touch, Dir: filepath.Join(dir, "nope")}},
		{"cwd-file", Request{Command: touch, Dir: file}},
		// Environment names and values.
		{"env-eq", Request{Command: touch, Env: map[string]string{"A=B": "x"}}},
		{"env-nul", Request{Command: touch, Env: map[string]string{"A": "x\x00"}}},
		{"unset-empty", Request{Command: touch, Unset: []string{""}}},
		// Spill names.
		{"session", Request{Command: touch, Session: "../x"}},
		{"label", Request{Command: touch, Label: "a/b"}},
		// Policies.
		{"policy", Request{Command: touch, StdoutPolicy: "middle"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Run(context.Background(), tc.req)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("err = %v, want ErrInvalidRequest", err)
			}
		})
	}
	if _, err := os.Stat(proof); err == nil {
		t.Error("an invalid request started its command")
	}
}

func TestParseTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want time.Duration // 0: rejected
	}{
		{0, 0},                         // zero is not "absent" on the wire
		{-1, 0},                        // negative
		{0.5, 0},                       // below the minimum
		{300.5, 0},                     // above the maximum
		{301, 0},                       // above the maximum
		{math.NaN(), 0},                // NaN
		{math.Inf(1), 0},               // +Inf
		{math.Inf(-1), 0},              // -Inf
		{1, time.Second},               // the minimum
		{300, 300 * time.Second},       // the maximum
		{2.5, 2500 * time.Millisecond}, // fractions inside the range
		{60, 60 * time.Second},         // the default, explicitly
	}
	for _, tc := range tests {
		got, err := ParseTimeout(tc.in, 0)
		if tc.want == 0 {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("ParseTimeout(%v) = %v, %v; want ErrInvalidRequest", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTimeout(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	// A supervisor configured with a wider ceiling accepts more; a request alone never can.
	if _, err := ParseTimeout(21600, CeilingTimeout); err != nil {
		t.Errorf("ceiling: %v", err)
	}
	// The wire's seconds and the library's Duration meet one check, with
	// one message.
	_, wire := ParseTimeout(301, 0)
	_, lib := newSup(t, Config{}).Run(context.Background(), Request{Command: "true", Timeout: 301 * time.Second})
	if wire == nil || lib == nil || wire.Error() != lib.Error() {
		t.Errorf("ParseTimeout says %v, Run says %v", wire, lib)
	}
}

// TestParseSeconds: every wire duration (timeout, yield, wait, lifetime,
// --grace) meets this one check, inclusive at both ends, with one message.
func TestParseSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   float64
		want time.Duration
		ok   bool
	}{
		{0, 0, true}, {30, 30 * time.Second, true}, {0.25, 250 * time.Millisecond, true},
		{-0.001, 0, false}, {30.001, 0, false}, {math.NaN(), 0, false}, {math.Inf(1), 0, false}, {math.Inf(-1), 0, false},
	} {
		got, err := ParseSeconds("wait", tc.in, 0, 30*time.Second)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseSeconds(%v) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidRequest) || Reason(err) != fmt.Sprintf("wait must be between 0 and 30 seconds, got %v", tc.in)) {
			t.Errorf("ParseSeconds(%v): %q (errors.Is invalid: %v)", tc.in, Reason(err), errors.Is(err, ErrInvalidRequest))
		}
	}
}

// TestRunTimeout is the case: partial output kept, exitCode null,
// the note at the end of stderr, returned within timeout + grace + 0.5 s.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			t.Parallel()
			s := newSup(t, Config{Containment: killtree.Config{Tier: tier}})
			begin := time.Now()
			res := run(t, s, Request{Command: "printf before; sleep 30; printf after", Timeout: time.Second})
			if took := time.Since(begin); took > time.Second+DefaultGrace+500*time.Millisecond {
				t.Errorf("took %v", took)
			}
			if !res.TimedOut || res.ExitCode != nil || res.Signal == "" {
				t.Errorf("timedOut %v exitCode %v signal %q", res.TimedOut, res.ExitCode, res.Signal)
			}
			if res.Stdout != "before" {
				t.Errorf("stdout %q", res.Stdout)
			}
			lines := strings.Split(res.Stderr, "\n")
			last := lines[len(lines)-1]
			for _, want := range []string{"timed out after 1s", "killed its process tree", "longer timeout", "300s"} {
				if !strings.Contains(last, want) {
					t.Errorf("last stderr line %q lacks %q", last, want)
				}
			}
			if res.Kill.Processes < 1 {
				t.Errorf("kill.processes = %d", res.Kill.Processes)
			}
		})
	}
}

// TestRunIgnoresTerm: a tree that ignores SIGTERM still dies after the grace.
func TestRunIgnoresTerm(t *testing.T) {
	t.Parallel()
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			t.Parallel()
			s := newSup(t, Config{Grace: 300 * time.Millisecond, Containment: killtree.Config{Tier: tier}})
			res := run(t, s, Request{Command: "trap '' TERM; sleep 30; echo survived", Timeout: time.Second})
			if !res.TimedOut || res.Signal != "SIGKILL" || strings.Contains(res.Stdout, "survived") {
				t.Errorf("timedOut %v signal %q stdout %q", res.TimedOut, res.Signal, res.Stdout)
			}
		})
	}
}

// TestRunLingering: a background child is killed after the settle and
// counted; Run does not wait for it.
func TestRunLingering(t *testing.T) {
	t.Parallel()
	for _, tier := range tiers(t) {
		for _, cmd := range []string{"echo a; sleep 30 & echo b", "echo a; (setsid sleep 30 &); echo b"} {
			t.Run(string(tier)+"/"+cmd, func(t *testing.T) {
				t.Parallel()
				s := newSup(t, Config{Containment: killtree.Config{Tier: tier}})
				begin := time.Now()
				res := run(t, s, Request{Command: cmd})
				if took := time.Since(begin); took > DefaultSettle+time.Second {
					t.Errorf("took %v", took)
				}
				if res.Stdout != "a\nb\n" || res.ExitCode == nil || *res.ExitCode != 0 {
					t.Errorf("stdout %q exit %v", res.Stdout, res.ExitCode)
				}
				if res.Kill.Lingering < 1 || res.Kill.Processes < 1 {
					t.Errorf("kill %+v", res.Kill)
				}
			})
		}
	}
}

// TestRunSetsidWriter: a setsid'd loop keeps writing to stdout after the
// shell exits; Run returns, kills it, and delivers nothing after the result.
func TestRunSetsidWriter(t *testing.T) {
	t.Parallel()
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			t.Parallel()
			s := newSup(t, Config{Containment: killtree.Config{Tier: tier}})
			rec := newRecorder(t)
			res := run(t, s, Request{
				Command: "setsid bash -c 'trap \"\" PIPE; while :; do echo x; sleep 0.01; done' & echo started",
				OnEvent: rec.on,
			})
			if !strings.HasPrefix(res.Stdout, "started\n") {
				t.Errorf("stdout %q", res.Stdout)
			}
			if res.Kill.Processes < 1 {
				t.Errorf("kill %+v", res.Kill)
			}
			if n := rec.count(EventResult); n != 1 {
				t.Errorf("%d result events", n)
			}
		})
	}
}

// TestRunEscapees runs proctest's escaper: plain, setsid and double-forked
// writers that ignore SIGPIPE. Nothing survives in any tier.
func TestRunEscapees(t *testing.T) {
	t.Parallel()
	for _, tier := range tiers(t) {
		t.Run(string(tier), func(t *testing.T) {
			t.Parallel()
			s := newSup(t, Config{Containment: killtree.Config{Tier: tier}})
			res := run(t, s, Request{Command: proctest.Command("escaper", "20")})
			if !strings.Contains(res.Stdout, "started\n") || res.Kill.Processes < 3 {
				t.Errorf("stdout %q kill %+v", res.Stdout, res.Kill)
			}
		})
	}
}

func TestRunAbort(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder(t)
	var once bool
	req := Request{Command: "yes", OnEvent: func(ev Event) {
		rec.on(ev)
		if ev.Event == EventOutput && !once {
			once = true
			cancel()
		}
	}}
	begin := time.Now()
	res, err := s.Run(ctx, marked(t, req))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("abort took %v", took)
	}
	if !res.Aborted || res.TimedOut || res.ExitCode != nil {
		t.Errorf("aborted %v timedOut %v exit %v", res.Aborted, res.TimedOut, res.ExitCode)
	}
	if !strings.Contains(res.Stderr, "aborted") {
		t.Errorf("stderr %q", res.Stderr)
	}
	if n := rec.count(EventResult); n != 1 {
		t.Errorf("%d result events", n)
	}
}

// TestRunEventsCapped: with a blocked callback a flood coalesces and ends
// with exactly one capped event per stream; seq stays contiguous.
func TestRunEventsCapped(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	rec := newRecorder(t)
	unblock := make(chan struct{})
	blocked := false
	req := Request{
		Command: "head -c 4000000 /dev/zero | tr '\\0' 'o'; head -c 3000000 /dev/zero | tr '\\0' 'e' >&2",
		OnEvent: func(ev Event) {
			if !blocked {
				blocked = true
				<-unblock // hold the first event until the command is done
			}
			rec.on(ev)
		},
	}
	done := make(chan Result, 1)
	go func() {
		res, err := s.Run(context.Background(), marked(t, req))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// Unblock once the command's output was fully drained, which proves the
	// drain never waited for the callback.
	waitFor(t, func() bool { return s.Stats().DrainedBytes >= 7000000 })
	close(unblock)
	res := <-done
	if res.StdoutInfo.TotalBytes != 4000000 || res.StderrInfo.TotalBytes != 3000000 {
		t.Errorf("totals %d %d", res.StdoutInfo.TotalBytes, res.StderrInfo.TotalBytes)
	}
	if n := rec.count(EventCapped); n != 2 {
		t.Errorf("%d capped events, want one per stream", n)
	}
	if got := rec.data[Stdout].Len(); got != DefaultLiveCap {
		t.Errorf("live stdout carried %d bytes, want %d", got, DefaultLiveCap)
	}
	if last := rec.events[len(rec.events)-1]; last.Event != EventResult || last.Result == nil {
		t.Errorf("last event %+v", last)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never became true")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunGigabyte: 1 GB to stdout costs bounded memory and counts exactly.
func TestRunGigabyte(t *testing.T) {
	proctest.Heavy(t)
	if testing.Short() {
		t.Skip("1 GB flood in -short mode")
	}
	s := newSup(t, Config{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := run(t, s, Request{Command: "yes | head -c 1073741824"})
	runtime.ReadMemStats(&after)
	if res.StdoutInfo.TotalBytes != 1<<30 || res.StdoutInfo.TotalLines != 1<<29 {
		t.Errorf("totals %d bytes %d lines", res.StdoutInfo.TotalBytes, res.StdoutInfo.TotalLines)
	}
	if res.StdoutInfo.CapturedBytes > 512<<10 || res.StdoutInfo.OmittedBytes != 1<<30-res.StdoutInfo.CapturedBytes {
		t.Errorf("captured %d omitted %d", res.StdoutInfo.CapturedBytes, res.StdoutInfo.OmittedBytes)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("allocated %d MiB while draining 1 GiB", grew>>20)
	}
	if !res.Truncated || res.StdoutInfo.KeptLines != 4000 {
		t.Errorf("truncated %v kept %d", res.Truncated, res.StdoutInfo.KeptLines)
	}
}

// TestRunGiantLine: a single line longer than the budget yields a prefix,
// never an empty payload, and the single-line marker.
func TestRunGiantLine(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{DataDir: t.TempDir()})
	res := run(t, s, Request{Command: "head -c 4200000 /dev/zero | tr '\\0' a"})
	// The spill stopped at the capture ceiling (512 KiB), so the marker says
	// how much of the stream it holds, not "Full output".
	want := fmt.Sprintf("[truncated: no complete line fits the 96KB limit; kept 98304 bytes of a single 4200000-byte line. Output up to byte 524288 of 4200000 saved to %s — Grep it, or Read it with offset/limit.]", res.StdoutInfo.SpillPath)
	if !strings.HasPrefix(res.Stdout, strings.Repeat("a", 98304)) || !strings.HasSuffix(res.Stdout, want) {
		t.Errorf("stdout: %d bytes ending %q", len(res.Stdout), res.Stdout[max(0, len(res.Stdout)-300):])
	}
	spilled, err := os.ReadFile(res.StdoutInfo.SpillPath)
	if err != nil || len(spilled) != 512<<10 {
		t.Errorf("spill: %d bytes, %v", len(spilled), err)
	}
}

// TestRunCutAndSpill: seq 1 100000 is cut to its first 4000 lines, with the
// spill sentence naming a file that holds more than the view: its 588,895
// bytes pass the 512 KiB capture ceiling, so the file holds the stream up to
// that byte and the sentence says so.
func TestRunCutAndSpill(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{DataDir: t.TempDir()})
	res := run(t, s, Request{Command: "seq 1 100000; seq 1 50000 >&2", Session: "s1", Label: "lbl"})
	info := res.StdoutInfo
	if !info.Truncated || info.KeptLines != 4000 || info.TotalLines != 100000 || info.SpillPath == "" {
		t.Fatalf("stdout info %+v", info)
	}
	wantMarker := fmt.Sprintf("[truncated: kept the first 4000 of 100000 lines; limit 4000 lines / 96KB. Output up to byte 524288 of 588895 saved to %s — Grep it, or Read it with offset/limit.]", info.SpillPath)
	if !strings.HasSuffix(res.Stdout, "4000\n"+wantMarker) {
		t.Errorf("stdout ends %q", res.Stdout[len(res.Stdout)-200:])
	}
	if !strings.HasPrefix(res.Stderr, "[truncated: kept the last 4000 of 50000 lines") || !strings.HasSuffix(res.Stderr, "\n50000\n") {
		t.Errorf("stderr starts %q ends %q", res.Stderr[:120], res.Stderr[len(res.Stderr)-20:])
	}
	if !strings.Contains(info.SpillPath, filepath.Join("scratch", "s1", "tool-output", "lbl.stdout-")) {
		t.Errorf("spill path %q", info.SpillPath)
	}
}

// TestRunMany: 1,000 runs in a row (100 outside the heavy suite) leave no
// zombie, no descriptor and no goroutine behind (goleak checks goroutines at
// the end of the package).
func TestRunMany(t *testing.T) {
	n := 100
	if proctest.HeavyOn() && !testing.Short() {
		n = 1000
	}
	s := newSup(t, Config{})
	for range 10 { // warm up lazily created descriptors (watchdog, inotify)
		run(t, s, Request{Command: "true"})
	}
	fds := proctest.FDCount(t)
	for i := range n {
		res := run(t, s, Request{Command: "echo $0 >/dev/null; (sleep 0.001 &); true"})
		if res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("run %d: %+v", i, res)
		}
	}
	if z := proctest.Zombies(os.Getpid()); len(z) > 0 {
		t.Errorf("zombies: %v", z)
	}
	if got := proctest.FDCount(t); got > fds {
		t.Errorf("descriptors grew from %d to %d", fds, got)
	}
}

// TestEnvironRules checks environ's precedence rules one by one, and that no
// name appears twice.
func TestEnvironRules(t *testing.T) {
	t.Setenv("PAGER", "less")
	t.Setenv("CORRAL_TEST_KEEP", "1")
	t.Setenv(RunIDEnv, "inherited-id")
	tests := []struct {
		name  string
		cfg   Config
		env   map[string]string
		unset []string
		want  map[string]string // name -> value, "" for absent
	}{
		{"suppression replaces the inherited value", Config{}, nil, nil,
			map[string]string{"PAGER": "cat", "CORRAL_TEST_KEEP": "1", RunIDEnv: "run-1"}},
		{"without suppression the inherited value stays", Config{NoPromptSuppression: true}, nil, nil,
			map[string]string{"PAGER": "less", "EDITOR": os.Getenv("EDITOR")}},
		{"a request cannot forge the run ID", Config{}, map[string]string{RunIDEnv: "forged"}, nil,
			map[string]string{RunIDEnv: "run-1"}},
		{"unset beats the request's own value", Config{}, map[string]string{"Y": "2"}, []string{"Y", "CORRAL_TEST_KEEP"},
			map[string]string{"Y": "", "CORRAL_TEST_KEEP": ""}},
		{"scrub beats everything", Config{Scrub: []string{"PAGER"}}, map[string]string{"PAGER": "more"}, nil,
			map[string]string{"PAGER": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Supervisor{cfg: tc.cfg}
			env := s.environ(validated{Request: Request{Env: tc.env, Unset: tc.unset}}, "run-1", nil)
			got := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := got[k]; dup {
					t.Errorf("%s appears twice", k)
				}
				got[k] = v
			}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
		})
	}
}

// TestCloseRacesRuns closes a Supervisor while commands start and run: each
// Run returns at once, with a Result or an error (ErrClosed for those that
// start too late), Close is idempotent, and nothing is left
// running. A Run whose tree Close killed used to wait for its timeout: the
// exit watcher ended without closing Exited.
func TestCloseRacesRuns(t *testing.T) {
	s := newSup(t, Config{Grace: NoGrace})
	req := marked(t, Request{Command: "sleep 0.05"})
	errs := make(chan error, 16)
	for range cap(errs) {
		go func() {
			_, err := s.Run(context.Background(), req)
			errs <- err
		}()
	}
	time.Sleep(20 * time.Millisecond) // let some start: the race under test
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	deadline := time.After(10 * time.Second) // far below the 60 s timeout a lost run would wait
	for range cap(errs) {
		select {
		case err := <-errs:
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Logf("run: %v", err) // a run cut by Close may fail otherwise; it must not hang
			}
		case <-deadline:
			t.Fatal("a Run still waits after Close")
		}
	}
	if _, err := s.Run(context.Background(), req); !errors.Is(err, ErrClosed) || !errors.Is(err, killtree.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed (and killtree.ErrClosed)", err)
	}
	if _, err := s.Jobs().Start(JobRequest{Request: req}); !errors.Is(err, ErrClosed) || !errors.Is(err, killtree.ErrClosed) {
		t.Errorf("Jobs.Start after Close: %v, want ErrClosed (and killtree.ErrClosed)", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestRunAbortCause: an abort whose cause is ErrClientGone SIGKILLs a tree
// that ignores SIGTERM at once; any other cancel keeps the grace first.
func TestRunAbortCause(t *testing.T) {
	t.Parallel()
	const grace = 1500 * time.Millisecond
	for _, tc := range []struct {
		name    string
		cause   error
		atMost  time.Duration // from the cancel to Run's return
		atLeast time.Duration
	}{
		// the client went away: nobody reads a graceful ending
		{"gone", ErrClientGone, time.Second, 0},
		// an explicit cancel: SIGTERM, the whole grace (TERM is ignored), SIGKILL
		{"cancel", context.Canceled, grace + 2*time.Second, grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSup(t, Config{Grace: grace})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var cancelled time.Time
			req := Request{
				// Every member ignores SIGTERM (SIG_IGN is inherited).
				Command: "trap '' TERM; sleep 30 & sleep 30 & echo ready; wait; echo survived",
				OnEvent: func(ev Event) {
					if ev.Event == EventOutput && cancelled.IsZero() {
						cancelled = time.Now()
						cancel(tc.cause)
					}
				},
			}
			res, err := s.Run(ctx, marked(t, req))
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(cancelled)
			if took > tc.atMost || took < tc.atLeast {
				t.Errorf("the tree took %v to go down, want %v to %v", took, tc.atLeast, tc.atMost)
			}
			if !res.Aborted || res.Signal != "SIGKILL" || strings.Contains(res.Stdout, "survived") {
				t.Errorf("aborted %v signal %q stdout %q", res.Aborted, res.Signal, res.Stdout)
			}
			if res.Kill.Processes < 3 {
				t.Errorf("kill %+v, want the shell and both sleeps", res.Kill)
			}
		})
	}
}

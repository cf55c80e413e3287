package supervisor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/killtree"
)

// TestWaitFallback runs the lifecycle through wait's fallback (the tree's
// exit watcher, and the background pump from the start), which Linux takes
// when it cannot get a pidfd or an eventfd for the poll loop: the same
// results as the poll loop gives.
func TestWaitFallback(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: 200 * time.Millisecond, Containment: killtree.Config{Tier: killtree.TierPgroup}})
	s.noPollLoop = true
	tests := []struct {
		name  string
		req   Request
		abort bool // cancel the context once the command printed something
		check func(t *testing.T, res Result)
	}{
		// Exit code and both streams.
		{name: "exit", req: Request{Command: "echo out; echo err >&2; exit 3"}, check: func(t *testing.T, res Result) {
			if res.ExitCode == nil || *res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
				t.Errorf("exit %v stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
		}},
		// The timeout still fires, and the partial output is kept.
		{name: "timeout", req: Request{Command: "printf before; sleep 30", Timeout: time.Second}, check: func(t *testing.T, res Result) {
			if !res.TimedOut || res.Stdout != "before" {
				t.Errorf("timedOut %v stdout %q", res.TimedOut, res.Stdout)
			}
		}},
		// A cancelled context aborts a flood.
		{name: "abort", req: Request{Command: "yes"}, abort: true, check: func(t *testing.T, res Result) {
			if !res.Aborted || res.StdoutInfo.TotalBytes == 0 {
				t.Errorf("aborted %v stdout bytes %d", res.Aborted, res.StdoutInfo.TotalBytes)
			}
		}},
		// A writer the shell left behind is drained, then killed.
		{name: "lingering-writer", req: Request{Command: "setsid bash -c 'while :; do echo x; sleep 0.01; done' & echo started"}, check: func(t *testing.T, res Result) {
			if !strings.HasPrefix(res.Stdout, "started\n") || res.Kill.Lingering < 1 {
				t.Errorf("stdout %q kill %+v", res.Stdout, res.Kill)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := tc.req
			if tc.abort {
				req.OnEvent = func(ev Event) {
					if ev.Event == EventOutput {
						cancel()
					}
				}
			}
			begin := time.Now()
			res, err := s.Run(ctx, marked(t, req))
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(begin); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			tc.check(t, res)
		})
	}
}

// TestRunFloodTimeout: a flood never lets up, so the poll loop always has a
// pipe ready; the deadline still ends it on time (maxReadsPerWake), and the
// count of what was drained is kept.
func TestRunFloodTimeout(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Grace: NoGrace})
	begin := time.Now()
	res := run(t, s, Request{Command: "yes", Timeout: time.Second})
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("took %v for a 1 s timeout", took)
	}
	if !res.TimedOut || res.StdoutInfo.TotalBytes < 1<<20 {
		t.Errorf("timedOut %v, %d bytes drained", res.TimedOut, res.StdoutInfo.TotalBytes)
	}
}

// TestRunBusyHandOff: a command that proves busy leaves the poll loop for
// drain goroutines in the runtime's poller, by volume (a 1 MB burst, then
// quiet) or by wake-ups (a trickle of 100 lines); nothing is lost or doubled
// on the way, and the end is still seen.
func TestRunBusyHandOff(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{})
	tests := []struct {
		name, cmd      string
		stdout, stderr string
		bytes          int64
	}{
		// Past busyBytes at once, then the end comes later.
		{name: "volume", cmd: "head -c 1000000 /dev/zero; sleep 0.2; echo done >&2", stderr: "done\n", bytes: 1000000},
		// Past busyWakeups, one line at a time.
		{name: "trickle", cmd: "for i in $(seq 100); do echo $i; sleep 0.002; done", stdout: seqOutput(100), bytes: int64(len(seqOutput(100)))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := run(t, s, Request{Command: tc.cmd})
			if res.ExitCode == nil || *res.ExitCode != 0 || res.StdoutInfo.TotalBytes != tc.bytes || res.Stderr != tc.stderr {
				t.Errorf("exit %v, %d stdout bytes, stderr %q; want 0, %d, %q", res.ExitCode, res.StdoutInfo.TotalBytes, res.Stderr, tc.bytes, tc.stderr)
			}
			if tc.stdout != "" && res.Stdout != tc.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, tc.stdout)
			}
		})
	}
}

// TestStopDrains: drain goroutines reading pipes whose write ends never
// close (held here, as by a process nothing can kill) end when stopDrains
// gives up on them, after draining what the pipes carried.
func TestStopDrains(t *testing.T) {
	t.Parallel()
	s := newSup(t, Config{Containment: killtree.Config{Tier: killtree.TierPgroup}})
	p := &proc{s: s, log: s.log, drained: make(chan error, 2)}
	p.out = newRetained(budget.PolicyHead, s.cfg.Capture, &s.drained, nil, nil)
	p.err = newRetained(budget.PolicyTail, s.cfg.Capture, &s.drained, nil, nil)
	wo, we, err := p.outs.open()
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	defer we.Close()
	wo.Write([]byte("out\n"))
	we.Write([]byte("err\n"))
	p.handOff()
	if p.pending != 2 {
		t.Fatalf("pending %d, want 2", p.pending)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.out.head.Counts().TotalBytes < 4 || p.err.tail.Counts().TotalBytes < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the drains did not read the pipes")
		}
		time.Sleep(time.Millisecond) // polling the drains' progress
	}
	p.stopDrains()
	for range 2 {
		select {
		case err := <-p.drained:
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("drained %v, want a deadline error", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a drain did not stop")
		}
	}
	p.outs.close()
}

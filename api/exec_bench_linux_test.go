package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-sh/corral/api"
	"github.com/corral-sh/corral/journal"
	"github.com/corral-sh/corral/supervisor"
)

// BenchmarkExecTrue is what corral serve costs over spawning the command
// yourself: POST /v1/exec of `true` (loopback HTTP, the journal on, as
// serve runs) against exec.Command("bash", "-c", "true").Run() from this
// process, in turn in one loop (the order rotated every iteration), so the
// machine's drift weighs on both alike. Reported: each side's p50, the
// ratio of the p50s (the figure; docs/performance.md, "The server") and the
// median of the per-iteration ratios. The same loop takes the exec apart:
// supervisor.Run of `true` without a journal (run-p50-ms: the containment
// and the shell's pipes over a bare spawn) and with the journal
// (journal-run-p50-ms: its two synced commits, the start one beside the
// shell's start-up behind the start gate, the Result's before the call
// returns), and times the disk's floor under the journal: one 4 KiB write
// and fdatasync to a file beside the journal's (fsync-p50-ms; a bbolt
// commit syncs twice). Two rows bound the figure: the same exec on a
// server without a journal (exec-no-journal-p50-ms, no-journal-p50-ratio:
// HTTP, containment and capture), and the spawn with the journal's two
// commits made as a journaled command makes them, the start one beside the
// shell's start-up with the command held until it returned (a command is
// journaled as started before it runs), the Result's after the shell's
// exit, without corral around it
// (bash-journal-p50-ms, floor-p50-ratio: what the promise that a Result is
// synced before the call returns costs on this store and disk before
// anything else; its Result is the one the exec returned); the third serves
// that floor over HTTP from a plain handler (http-bash-journal-p50-ms,
// http-floor-p50-ratio: the promise and the transport, nothing of corral's).
//
//	go test -run '^$' -bench ExecTrue -benchtime 300x ./api
func BenchmarkExecTrue(b *testing.B) {
	dir := b.TempDir()
	j, err := journal.Open(dir, journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	sup, err := supervisor.New(supervisor.Config{DataDir: dir, Journal: j})
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	bare, err := supervisor.New(supervisor.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()
	srv, err := api.New(api.Config{Supervisor: sup})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	bareSrv, err := api.New(api.Config{Supervisor: bare})
	if err != nil {
		b.Fatal(err)
	}
	bareTS := httptest.NewServer(bareSrv.Handler())
	defer bareTS.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var result []byte // the last Result an exec returned
	post := func(url string) func() {
		return func() {
			resp, err := client.Post(url+"/v1/exec", "application/json", strings.NewReader(`{"command":"true"}`))
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"exitCode":0`) {
				b.Fatalf("exec: %d %v %s", resp.StatusCode, err, body)
			}
			result = body
		}
	}
	run := func(s *supervisor.Supervisor) func() {
		return func() {
			res, err := s.Run(context.Background(), supervisor.Request{Command: "true"})
			if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
				b.Fatalf("run: %v %+v", err, res)
			}
		}
	}
	spawn := func() {
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	// The journal's floor: a spawn with the entry's two commits as a
	// journaled command has them (its own session, so the server's seq is
	// untouched). The start one runs beside the shell's start-up, and the
	// command waits for it: a command is journaled as started before it
	// runs (DESIGN, Journal), so the shell reads a byte from a pipe
	// written once the commit returned, as corral's start gate has it do.
	// The Result's commit comes after the shell's exit.
	spawnJournaled := func() {
		type started struct {
			st  journal.Started
			err error
		}
		ch := make(chan started, 1)
		go func() {
			st, err := j.Start("bench-floor", "true", time.Now())
			ch <- started{st, err}
		}()
		gateR, gateW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", "read -r -n 1 -u 3 && true")
		cmd.ExtraFiles = []*os.File{gateR}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		gateR.Close()
		s := <-ch
		if s.err != nil {
			b.Fatal(s.err)
		}
		st := s.st
		_, werr := gateW.Write([]byte{1})
		gateW.Close()
		if err := errors.Join(werr, cmd.Wait()); err != nil {
			b.Fatal(err)
		}
		if err := j.Finish(st, time.Now(), result, ""); err != nil {
			b.Fatal(err)
		}
	}
	// The same floor served over HTTP: a plain net/http handler that
	// reads the request, does the journaled spawn and writes the Result,
	// on a server of its own reached by the same client. What /v1/exec
	// adds over it is corral's own: the containment, the capture, the
	// Result's shaping and the API's handler chain.
	floorTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		spawnJournaled()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(result)
	}))
	defer floorTS.Close()
	f, err := os.OpenFile(filepath.Join(dir, "journal", "fsync-floor"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	fsync := func() {
		if _, err := f.WriteAt(page, 0); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	steps := []struct {
		name string
		fn   func()
		t    []time.Duration
	}{
		{name: "exec", fn: post(ts.URL)},
		{name: "bash", fn: spawn},
		{name: "run", fn: run(bare)},
		{name: "journal-run", fn: run(sup)},
		{name: "fsync", fn: fsync},
		{name: "exec-no-journal", fn: post(bareTS.URL)},
		{name: "bash-journal", fn: spawnJournaled},
		{name: "http-bash-journal", fn: post(floorTS.URL)},
	}
	// Each row once before the loop: the first exec opens the connection
	// and the session's journal, the first floor row its session.
	for _, st := range steps {
		st.fn()
	}
	var ratios []float64
	i := 0
	for b.Loop() {
		for k := range steps {
			st := &steps[(i+k)%len(steps)]
			begin := time.Now()
			st.fn()
			st.t = append(st.t, time.Since(begin))
		}
		i++
		last := len(steps[0].t) - 1
		ratios = append(ratios, float64(steps[0].t[last])/float64(steps[1].t[last]))
	}
	p50 := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	for _, st := range steps {
		b.ReportMetric(float64(p50(st.t).Microseconds())/1000, st.name+"-p50-ms")
	}
	slices.Sort(ratios)
	// ratio is a row's p50 over the bare spawn's (steps[1]).
	ratio := func(name string) float64 {
		for _, st := range steps {
			if st.name == name {
				return float64(p50(st.t)) / float64(p50(steps[1].t))
			}
		}
		panic(name)
	}
	b.ReportMetric(ratio("exec"), "p50-ratio")
	b.ReportMetric(ratio("exec-no-journal"), "no-journal-p50-ratio")
	b.ReportMetric(ratio("bash-journal"), "floor-p50-ratio")
	b.ReportMetric(ratio("http-bash-journal"), "http-floor-p50-ratio")
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
}

package api

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/corral-sh/corral/supervisor"
)

// Outcomes of corral_commands_total.
const (
	OutcomeSuccess  = "success"   // exit code 0
	OutcomeFailure  = "failure"   // a non-zero exit code
	OutcomeSignal   = "signal"    // the shell died of a signal nobody sent
	OutcomeTimeout  = "timed_out" // killed at the timeout
	OutcomeAborted  = "aborted"   // the caller went away or the server shut down
	OutcomeInvalid  = "invalid"   // refused before anything ran
	OutcomeError    = "error"     // could not start
	OutcomeRejected = "rejected"  // no slot free
)

// Outcomes lists every outcome label; each is exported at 0 from the start.
var Outcomes = []string{OutcomeSuccess, OutcomeFailure, OutcomeSignal, OutcomeTimeout, OutcomeAborted,
	OutcomeInvalid, OutcomeError, OutcomeRejected}

// Faces of corral_commands_total: the wire a command came through.
const (
	FaceHTTP     = "http"     // the HTTP API (/v1/exec, /v1/batch, /v1/jobs)
	FaceMCP      = "mcp"      // MCP tools, over stdio or /mcp
	FaceEnvd     = "envd"     // the E2B envd face (api/envd)
	FaceSandboxd = "sandboxd" // the agent-sandbox sandboxd face (api/sandboxd)
)

// Faces lists every face label; each is exported at 0 from the start.
var Faces = []string{FaceHTTP, FaceMCP, FaceEnvd, FaceSandboxd}

// Job states of corral_jobs; they do not overlap.
const (
	jobsRunning = "running" // running, not waiting for input
	jobsWaiting = "waiting" // running, blocked reading its input
	jobsExited  = "exited"  // exited and still retained (readable)
)

// metrics are the server's Prometheus collectors. Safe for concurrent use.
type metrics struct {
	commands  *prometheus.CounterVec
	duration  prometheus.Histogram
	drained   *prometheus.CounterVec
	killed    prometheus.Counter
	lingering prometheus.Counter
	running   prometheus.Gauge

	// watchers are the goroutines that wait for a job's end to count it
	// (watch); Server.Shutdown waits for them after it killed the jobs.
	watchers sync.WaitGroup
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_commands_total",
			Help: "Commands by face (http, mcp, envd, sandboxd) and outcome (success, failure, signal, timed_out, aborted, invalid, error, rejected); a background job counts once it ended.",
		}, []string{"face", "outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "corral_command_duration_seconds",
			Help:    "Wall-clock duration of commands that ran, from start to result.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}),
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_drained_bytes_total",
			Help: "Bytes drained from commands' pipes, by stream, whether kept or not.",
		}, []string{"stream"}),
		killed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_processes_killed_total",
			Help: "Processes killed after a shell exited, timed out or was aborted.",
		}),
		lingering: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_processes_lingering_total",
			Help: "Processes a shell left running behind it (killed after the settle).",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_commands_running",
			Help: "Commands running now (a batch counts the command slots it holds).",
		}),
	}
	// Every label is there from the start, so a rate over a series that
	// has not moved yet is 0 rather than absent.
	for _, f := range Faces {
		for _, o := range Outcomes {
			m.commands.WithLabelValues(f, o)
		}
	}
	for _, s := range []supervisor.Stream{supervisor.Stdout, supervisor.Stderr} {
		m.drained.WithLabelValues(string(s))
	}
	for _, c := range []prometheus.Collector{m.commands, m.duration, m.drained, m.killed, m.lingering, m.running} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) outcome(face, o string) { m.commands.WithLabelValues(face, o).Inc() }

// observe records one command's Result or error, come through face.
func (m *metrics) observe(face string, res supervisor.Result, err error, d time.Duration) {
	switch {
	case errors.Is(err, supervisor.ErrInvalidRequest):
		m.outcome(face, OutcomeInvalid)
		return
	case errors.Is(err, supervisor.ErrTooManyJobs), errors.Is(err, ErrBusy):
		m.outcome(face, OutcomeRejected)
		return
	case err != nil:
		m.outcome(face, OutcomeError)
		return
	}
	m.outcome(face, outcomeOf(res))
	m.duration.Observe(d.Seconds())
	m.drained.WithLabelValues(string(supervisor.Stdout)).Add(float64(res.StdoutInfo.TotalBytes))
	m.drained.WithLabelValues(string(supervisor.Stderr)).Add(float64(res.StderrInfo.TotalBytes))
	m.killed.Add(float64(res.Kill.Processes))
	m.lingering.Add(float64(res.Kill.Lingering))
}

// observeResult records a Result by its own duration (a job's, a batch
// item's).
func (m *metrics) observeResult(face string, res supervisor.Result, err error) {
	m.observe(face, res, err, time.Duration(res.DurationMs)*time.Millisecond)
}

// watch counts the job id once it ended, from a goroutine that lives as
// long as the job (the supervisor's Close, and Server.Shutdown, end every
// job). A job that is already gone is not counted: it was counted by
// whoever saw it end.
func (m *metrics) watch(jobs *supervisor.Jobs, face, id string) {
	js, err := jobs.OpenStream(id)
	if err != nil {
		return
	}
	m.watchers.Add(1)
	go func() {
		defer m.watchers.Done()
		<-js.Done()
		res, _ := js.Result()
		m.observeResult(face, res, nil)
	}()
}

func outcomeOf(res supervisor.Result) string {
	switch {
	case res.TimedOut:
		return OutcomeTimeout
	case res.Aborted:
		return OutcomeAborted
	case res.ExitCode == nil:
		return OutcomeSignal
	case *res.ExitCode == 0:
		return OutcomeSuccess
	}
	return OutcomeFailure
}

// Observer returns the function a face outside this package (api/envd,
// api/sandboxd: their Config.Observe) calls once for each command or
// process it ran, with its Result, or with the error that refused it, so
// that corral_commands_total counts it under face (FaceEnvd,
// FaceSandboxd). It is safe for concurrent use.
func (s *Server) Observer(face string) func(supervisor.Result, error) {
	return func(res supervisor.Result, err error) { s.metrics.observeResult(face, res, err) }
}

// registerGauges registers the collectors read at each scrape: the Go
// runtime's and the process's (unless reg has them already), the build,
// the jobs by state, whether the supervisor's journal is offline, and the
// Go runtime's soft memory limit (corral serve and corral mcp set it:
// docs/memory.md).
func registerGauges(reg prometheus.Registerer, sup *supervisor.Supervisor, version string) error {
	goc := withoutFamily{collectors.NewGoCollector(), "go_memstats_alloc_bytes"}
	for _, c := range []prometheus.Collector{goc, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				continue // a registry of the caller's that has them
			}
			return fmt.Errorf("api: register metrics: %w", err)
		}
	}
	limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_memory_limit_bytes",
		Help: "The Go runtime's soft memory limit the server runs under (debug.SetMemoryLimit; 9.223372036854776e+18 when none).",
	}, func() float64 { return float64(debug.SetMemoryLimit(-1)) })
	offline := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_journal_offline",
		Help: "1 once a storage fault (a damaged page, an I/O error, a full disk) took the journal offline: Results are not journaled until a restart.",
	}, func() float64 {
		if sup.Stats().JournalOffline {
			return 1
		}
		return 0
	})
	for _, c := range []prometheus.Collector{limit, offline, buildInfo(version), jobsCollector{sup.Jobs()}} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return nil
}

// withoutFamily is a collector without the family name. The Go collector's
// gauge go_memstats_alloc_bytes is the same value as its
// go_memstats_heap_alloc_bytes, and in OpenMetrics, where a counter's family
// is named without _total, its name is also the family of the counter
// go_memstats_alloc_bytes_total: two families of one name, an exposition
// that OpenMetrics parsers refuse (client_golang issue #829). Leaving the
// gauge out keeps both formats valid.
type withoutFamily struct {
	prometheus.Collector
	name string
}

func (w withoutFamily) keep(d *prometheus.Desc) bool {
	// Desc has no accessor for its name; String starts with it.
	return !strings.HasPrefix(d.String(), `Desc{fqName: "`+w.name+`",`)
}

func (w withoutFamily) Describe(ch chan<- *prometheus.Desc) {
	descs := make(chan *prometheus.Desc)
	go func() { w.Collector.Describe(descs); close(descs) }()
	for d := range descs {
		if w.keep(d) {
			ch <- d
		}
	}
}

func (w withoutFamily) Collect(ch chan<- prometheus.Metric) {
	metrics := make(chan prometheus.Metric)
	go func() { w.Collector.Collect(metrics); close(metrics) }()
	for m := range metrics {
		if w.keep(m.Desc()) {
			ch <- m
		}
	}
}

// buildInfo is corral_build_info: 1, labelled with the server's version
// (Config.Version, else the main module's), the Go version it was built
// with and the VCS revision it was built from ("" when the build has none,
// as for go run; "-dirty" appended for a modified tree).
func buildInfo(version string) prometheus.Collector {
	goVersion, revision := "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if version == "" {
			version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && revision != "" {
			revision += "-dirty"
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "corral_build_info",
		Help:        "1, labelled with the server's version, the Go version it was built with and its VCS revision.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goVersion, "revision": revision},
	})
	g.Set(1)
	return g
}

// jobsCollector is corral_jobs{state}: the background jobs running (not
// waiting), waiting for input, and exited but retained, read at each
// scrape (supervisor.Jobs.Counts).
type jobsCollector struct{ jobs *supervisor.Jobs }

var jobsDesc = prometheus.NewDesc("corral_jobs",
	"Background jobs by state: running (not waiting for input), waiting (blocked reading its input), exited (retained, still readable).",
	[]string{"state"}, nil)

func (c jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c jobsCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.jobs.Counts()
	for _, s := range []struct {
		state string
		n     int
	}{{jobsRunning, n.Running - n.Waiting}, {jobsWaiting, n.Waiting}, {jobsExited, n.Exited}} {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(s.n), s.state)
	}
}

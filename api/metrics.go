package api

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// metrics are the server's Prometheus collectors.
type metrics struct {
	commands  *prometheus.CounterVec
	duration  prometheus.Histogram
	drained   *prometheus.CounterVec
	killed    prometheus.Counter
	lingering prometheus.Counter
	running   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_commands_total",
			Help: "Commands by outcome: success, failure, signal, timed_out, aborted, invalid, error, rejected.",
		}, []string{"outcome"}),
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
	for _, c := range []prometheus.Collector{m.commands, m.duration, m.drained, m.killed, m.lingering, m.running} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) outcome(o string) { m.commands.WithLabelValues(o).Inc() }

// observe records one Run's Result or error.
func (m *metrics) observe(res supervisor.Result, err error, d time.Duration) {
	switch {
	case errors.Is(err, supervisor.ErrInvalidRequest):
		m.outcome(OutcomeInvalid)
		return
	case err != nil:
		m.outcome(OutcomeError)
		return
	}
	m.outcome(outcomeOf(res))
	m.duration.Observe(d.Seconds())
	m.drained.WithLabelValues(string(supervisor.Stdout)).Add(float64(res.StdoutInfo.TotalBytes))
	m.drained.WithLabelValues(string(supervisor.Stderr)).Add(float64(res.StderrInfo.TotalBytes))
	m.killed.Add(float64(res.Kill.Processes))
	m.lingering.Add(float64(res.Kill.Lingering))
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

// registerGauges registers the gauges read at each scrape: whether the
// supervisor's journal is offline, and the Go runtime's soft memory limit
// (corral serve and corral mcp set it: cmd/corral-server/memlimit.go).
func registerGauges(reg prometheus.Registerer, sup *supervisor.Supervisor) error {
	limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_memory_limit_bytes",
		Help: "The Go runtime's soft memory limit the server runs under (debug.SetMemoryLimit; 9.223372036854776e+18 when none).",
	}, func() float64 { return float64(debug.SetMemoryLimit(-1)) })
	if err := reg.Register(limit); err != nil {
		return fmt.Errorf("api: register metrics: %w", err)
	}
	offline := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_journal_offline",
		Help: "1 once a storage fault (a damaged page, an I/O error, a full disk) took the journal offline: Results are not journaled until a restart.",
	}, func() float64 {
		if sup.Stats().JournalOffline {
			return 1
		}
		return 0
	})
	if err := reg.Register(offline); err != nil {
		return fmt.Errorf("api: register metrics: %w", err)
	}
	return nil
}

package telemetry

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpflow/mcpflow/journal"
)

// CountBound caps each count read from the journal at scrape. The counts
// walk index keys only (no record is read), so a scrape costs about a
// microsecond per counted invocation; past CountBound a series reads
// CountBound (16.7 million: beyond what one journal is pruned to hold).
const CountBound = 1 << 24

// Observed by this process, whatever journal it writes: latencies and
// counters since it started.
var (
	callLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcpflow_tool_call_duration_seconds",
		Help:    "Latency of tools/call attempts sent by this process, by server and tool.",
		Buckets: decimalBuckets(0.001, 4, 10),
	}, []string{"server", "tool"})
	replays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpflow_replay_decisions_total",
		Help: "Replay-rule decisions journaled by this process, by verdict and reason.",
	}, []string{"verdict", "reason"})
	commitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mcpflow_journal_commit_duration_seconds",
		Help:    "Latency of journal group commits made by this process (a log append and an fdatasync on the bbolt file; a transaction on PostgreSQL).",
		Buckets: decimalBuckets(0.0001, 3, 10),
	})
	commitErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcpflow_journal_commit_errors_total",
		Help: "Journal commits that failed in this process.",
	})
)

// decimalBuckets is prometheus.ExponentialBuckets(start, factor, n) with
// each bound made the double nearest to its decimal value: start×factor^i
// computed in floating point carries the error of each product (0.0001×3
// is 0.00030000000000000003), which /metrics prints as it is, in the le
// label that queries and dashboards match. Rounded to 10 significant
// digits, then read back, a bound prints as its decimal (0.0003).
func decimalBuckets(start, factor float64, n int) []float64 {
	b := prometheus.ExponentialBuckets(start, factor, n)
	for i, v := range b {
		exact, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
		if err == nil {
			b[i] = exact
		}
	}
	return b
}

// ObserveCall records the latency of one tools/call attempt.
func ObserveCall(server, tool string, d time.Duration) {
	callLatency.WithLabelValues(server, tool).Observe(d.Seconds())
}

// ObserveDecision counts one journaled replay-rule decision.
func ObserveDecision(verdict, reason string) {
	replays.WithLabelValues(verdict, reason).Inc()
}

// Metrics is the collector of one journal's counts, read at scrape, and
// of what this process observed.
type Metrics struct {
	j        func() (journal.Store, error)
	sessions func() int
	reg      *prometheus.Registry

	runs, invs, waiting, commits, writes, active *prometheus.Desc
	applies, unapplied, applyFailing, logSync    *prometheus.Desc
}

// NewMetrics returns the metrics of the journal j returns (asked at each
// scrape: it may be opened late); sessions, when set, counts the server
// sessions open now.
func NewMetrics(j func() (journal.Store, error), sessions func() int) *Metrics {
	m := &Metrics{j: j, sessions: sessions, reg: prometheus.NewRegistry(),
		runs:    prometheus.NewDesc("mcpflow_runs", "Runs in the journal, by status.", []string{"status"}, nil),
		invs:    prometheus.NewDesc("mcpflow_invocations", "Invocations in the journal, by state.", []string{"state"}, nil),
		waiting: prometheus.NewDesc("mcpflow_invocations_waiting_for_operator", "Invocations whose outcome is unknown: an operator must resolve them.", nil, nil),
		commits: prometheus.NewDesc("mcpflow_journal_commits_total", "Journal commits since the journal was opened.", nil, nil),
		writes:  prometheus.NewDesc("mcpflow_journal_writes_total", "Journal facts committed since the journal was opened.", nil, nil),
		active:  prometheus.NewDesc("mcpflow_server_sessions_active", "MCP server sessions open in this process.", nil, nil),
		applies: prometheus.NewDesc("mcpflow_journal_log_applies_total",
			"Background commits of the bbolt journal's write-ahead log into its file since the journal was opened.", nil, nil),
		unapplied: prometheus.NewDesc("mcpflow_journal_log_unapplied_bytes",
			"Bytes of the bbolt journal's write-ahead log not yet in its file (writes are durable once in the log).", nil, nil),
		logSync: prometheus.NewDesc("mcpflow_journal_log_sync_seconds_total",
			"Time the bbolt journal's write-ahead log spent in fdatasync since the journal was opened (rate() is the share of the time a flush is in progress).", nil, nil),
		applyFailing: prometheus.NewDesc("mcpflow_journal_log_apply_failing",
			"1 while the last commit of the write-ahead log into the bbolt file failed (it is tried again every second; reads that need the file fail, and so do writes once the log is full).", nil, nil),
	}
	m.reg.MustRegister(m, callLatency, replays, commitLatency, commitErrors)
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.runs, m.invs, m.waiting, m.commits, m.writes, m.active, m.applies, m.unapplied, m.applyFailing, m.logSync} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the counts are read from the
// journal now, from index keys.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	send := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		if c, err := prometheus.NewConstMetric(d, t, v, labels...); err == nil {
			ch <- c
		}
	}
	if m.sessions != nil {
		send(m.active, prometheus.GaugeValue, float64(m.sessions()))
	}
	j, err := m.j()
	if err != nil {
		return
	}
	// The write counts first: the counts below are queries, which make
	// the log's entries go into the file.
	stats := j.Stats()
	send(m.commits, prometheus.CounterValue, float64(stats.Commits))
	send(m.writes, prometheus.CounterValue, float64(stats.Writes))
	if stats.Log {
		failing := 0.0
		if stats.ApplyErr != nil {
			failing = 1
		}
		send(m.applies, prometheus.CounterValue, float64(stats.Applies))
		send(m.unapplied, prometheus.GaugeValue, float64(stats.Unapplied))
		send(m.applyFailing, prometheus.GaugeValue, failing)
		send(m.logSync, prometheus.CounterValue, stats.LogSync.Seconds())
	}
	for _, st := range journal.RunStatuses() {
		if n, _, err := j.CountRuns(journal.RunFilter{Status: st}, CountBound); err == nil {
			send(m.runs, prometheus.GaugeValue, float64(n), st.String())
		}
	}
	for _, st := range journal.States() {
		n, _, err := j.CountInvocations(journal.Filter{State: st}, CountBound)
		if err != nil {
			continue
		}
		send(m.invs, prometheus.GaugeValue, float64(n), st.String())
		if st == journal.StateOutcomeUnknown {
			send(m.waiting, prometheus.GaugeValue, float64(n))
		}
	}
}

package telemetry

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
)

// TestMetricsOfTheLog: a scrape tells what of the bbolt journal's log is
// not in its file yet (read before the scrape's own queries, which apply
// it), and how many times the log was applied.
func TestMetricsOfTheLog(t *testing.T) {
	j, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), &journal.Options{ApplyIdle: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	m := NewMetrics(func() (journal.Store, error) { return j, nil }, nil)
	// scrape gathers every series, by name and labels (name{k="v"}).
	scrape := func() map[string]float64 {
		fams, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range fams {
			for _, s := range f.GetMetric() {
				key := f.GetName()
				for _, l := range s.GetLabel() {
					key += fmt.Sprintf("{%s=%q}", l.GetName(), l.GetValue())
				}
				out[key] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
			}
		}
		return out
	}

	for range 3 {
		if err := j.CreateRun(&journal.Run{Workflow: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	first := scrape()
	if got := first["mcpflow_journal_log_unapplied_bytes"]; got < 3*4096 {
		t.Errorf("unapplied bytes %v after three writes the applier waits to apply; want at least three 4 KiB entries", got)
	}
	if first[`mcpflow_runs{status="running"}`] != 3 {
		t.Errorf("runs %v, want 3", first[`mcpflow_runs{status="running"}`])
	}
	second := scrape()
	if second["mcpflow_journal_log_unapplied_bytes"] != 0 || second["mcpflow_journal_log_applies_total"] != first["mcpflow_journal_log_applies_total"]+1 {
		t.Errorf("after the first scrape applied the log: unapplied %v, applies %v then %v; want 0, one more",
			second["mcpflow_journal_log_unapplied_bytes"], first["mcpflow_journal_log_applies_total"], second["mcpflow_journal_log_applies_total"])
	}
	if got, want := second["mcpflow_journal_log_sync_seconds_total"], j.Stats().LogSync.Seconds(); got <= 0 || got != want {
		t.Errorf("log sync seconds %v, want the journal's %v, more than 0 after three commits", got, want)
	}
	if v, ok := second["mcpflow_journal_log_apply_failing"]; !ok || v != 0 {
		t.Errorf("apply failing: %v (reported %v), want 0", v, ok)
	}
}

// TestBucketsAreDecimals: every histogram bound prints as the decimal it
// stands for, the way /metrics prints it (strconv 'g', -1): 0.0003, not
// 0.00030000000000000003.
func TestBucketsAreDecimals(t *testing.T) {
	for _, tc := range []struct {
		start, factor float64
		want          string
	}{
		{0.0001, 3, "[0.0001 0.0003 0.0009 0.0027 0.0081 0.0243 0.0729 0.2187 0.6561 1.9683]"},
		{0.001, 4, "[0.001 0.004 0.016 0.064 0.256 1.024 4.096 16.384 65.536 262.144]"},
	} {
		var got []string
		for _, b := range decimalBuckets(tc.start, tc.factor, 10) {
			got = append(got, strconv.FormatFloat(b, 'g', -1, 64))
		}
		if s := "[" + strings.Join(got, " ") + "]"; s != tc.want {
			t.Errorf("decimalBuckets(%v, %v, 10) = %s, want %s", tc.start, tc.factor, s, tc.want)
		}
	}
}

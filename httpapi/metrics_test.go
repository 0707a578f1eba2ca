package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/api"
	"github.com/mcpflow/mcpflow/httpapi"
	"github.com/mcpflow/mcpflow/journal"
)

// scrape reads /metrics: each sample's value by its name and labels, as
// printed ("mcpflow_runs{status=\"running\"}").
func (r *rig) scrape() map[string]float64 {
	r.t.Helper()
	req, _ := http.NewRequest("GET", "http://mcpflow/metrics", nil)
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		b, _ := io.ReadAll(resp.Body)
		r.t.Fatalf("/metrics: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			r.t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// checkCounts compares every status and state series with the journal.
func (r *rig) checkCounts(m map[string]float64) {
	r.t.Helper()
	j, err := r.svc.Journal()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, st := range journal.RunStatuses() {
		n, _, err := j.CountRuns(journal.RunFilter{Status: st}, 1000)
		if err != nil {
			r.t.Fatal(err)
		}
		if key := fmt.Sprintf("mcpflow_runs{status=%q}", st); m[key] != float64(n) {
			r.t.Errorf("%s = %v, journal has %d", key, m[key], n)
		}
	}
	for _, st := range journal.States() {
		n, _, err := j.CountInvocations(journal.Filter{State: st}, 1000)
		if err != nil {
			r.t.Fatal(err)
		}
		if key := fmt.Sprintf("mcpflow_invocations{state=%q}", st); m[key] != float64(n) {
			r.t.Errorf("%s = %v, journal has %d", key, m[key], n)
		}
		if st == journal.StateOutcomeUnknown && m["mcpflow_invocations_waiting_for_operator"] != float64(n) {
			r.t.Errorf("waiting for operator %v, journal has %d outcome_unknown", m["mcpflow_invocations_waiting_for_operator"], n)
		}
	}
}

// TestMetrics scrapes /metrics while a run waits for approval and one is in
// a call, and after they ended: the counts by status and state are the
// journal's, tools/call latencies and commits are counted, and the server
// session in use is open.
func TestMetrics(t *testing.T) {
	r := newRig(t, nil)
	r.workflow("gate.yaml", "name: gate\nsteps:\n  - {id: deploy, server: demo, tool: greet, approve: true, with: {name: prod}}\n")
	r.workflow("long.yaml", "name: long\nsteps:\n  - {id: count, server: demo, tool: count_slowly, with: {n: 1000, delay_ms: 100}}\n")
	r.workflow("hi.yaml", "name: hi\nsteps:\n  - {id: hi, server: demo, tool: greet, with: {name: x}}\n")

	var gate, long, hi api.Started
	r.do("POST", "/api/runs", map[string]any{"file": "gate.yaml"}, &gate)
	r.waitStatus(gate.Run, journal.RunBlocked)

	inCall := r.firstProgress()
	r.do("POST", "/api/runs", map[string]any{"file": "long.yaml"}, &long)
	<-inCall // the long run's call is in flight until it is cancelled

	during := r.scrape()
	r.checkCounts(during)
	if during[`mcpflow_runs{status="running"}`] != 1 || during[`mcpflow_runs{status="blocked"}`] != 1 || during[`mcpflow_invocations{state="intent"}`] != 1 {
		t.Errorf("during: running %v, blocked %v, intents %v; want 1, 1, 1", during[`mcpflow_runs{status="running"}`], during[`mcpflow_runs{status="blocked"}`], during[`mcpflow_invocations{state="intent"}`])
	}
	if during["mcpflow_server_sessions_active"] < 1 {
		t.Errorf("active sessions %v during a call", during["mcpflow_server_sessions_active"])
	}

	if code := r.do("POST", "/api/runs/"+long.Run+"/cancel", map[string]any{"reason": "enough"}, nil); code != http.StatusAccepted {
		t.Fatalf("cancel: %d", code)
	}
	r.waitStatus(long.Run, journal.RunCancelled)
	r.do("POST", "/api/runs", map[string]any{"file": "hi.yaml"}, &hi)
	r.waitStatus(hi.Run, journal.RunSucceeded)

	after := r.scrape()
	r.checkCounts(after)
	for key, want := range map[string]float64{
		`mcpflow_runs{status="running"}`:         0,
		`mcpflow_runs{status="blocked"}`:         1,
		`mcpflow_runs{status="cancelled"}`:       1,
		`mcpflow_runs{status="succeeded"}`:       1,
		`mcpflow_invocations{state="completed"}`: 1,
		`mcpflow_invocations{state="aborted"}`:   1,
	} {
		if after[key] != want {
			t.Errorf("after: %s = %v, want %v", key, after[key], want)
		}
	}
	j, _ := r.svc.Journal()
	if st := j.Stats(); after["mcpflow_journal_commits_total"] != float64(st.Commits) || st.Commits == 0 {
		t.Errorf("commits %v, journal says %d", after["mcpflow_journal_commits_total"], st.Commits)
	}
	if v, ok := after["mcpflow_journal_log_apply_failing"]; !ok || v != 0 || after["mcpflow_journal_log_applies_total"] < 1 {
		t.Errorf("the log's metrics: apply failing %v (reported %v), applies %v; want 0, at least 1 (the scrapes' queries apply the log)",
			v, ok, after["mcpflow_journal_log_applies_total"])
	}
	if _, ok := after["mcpflow_journal_log_unapplied_bytes"]; !ok {
		t.Error("no mcpflow_journal_log_unapplied_bytes")
	}
	if got := after["mcpflow_journal_log_sync_seconds_total"]; got <= 0 || got > j.Stats().LogSync.Seconds() {
		t.Errorf("log sync seconds %v after the runs' commits; want more than 0, at most the journal's %v now", got, j.Stats().LogSync.Seconds())
	}
	if after[`mcpflow_tool_call_duration_seconds_count{server="demo",tool="greet"}`] < 1 || after[`mcpflow_tool_call_duration_seconds_count{server="demo",tool="count_slowly"}`] < 1 {
		t.Errorf("tools/call latencies not counted: %v", after)
	}
}

// TestMetricsNeedTheToken: on TCP, /metrics follows the API's token.
func TestMetricsNeedTheToken(t *testing.T) {
	r := newRig(t, nil)
	const token = "0123456789abcdef0123"
	tcp, err := httpapi.New(&httpapi.Options{Service: r.svc, Listen: "127.0.0.1:0", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := tcp.Start(); err != nil {
		t.Fatal(err)
	}
	defer tcp.Stop(context.Background())
	for auth, status := range map[string]int{"": 401, "Bearer " + token: 200} {
		req, _ := http.NewRequest("GET", "http://"+tcp.Addr().String()+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Errorf("/metrics with Authorization %q: %d, want %d", auth, resp.StatusCode, status)
		}
	}
}

// TestMetricsBucketBounds: /metrics prints each histogram bound as the
// decimal it stands for: le="0.0003", never le="0.00030000000000000003".
func TestMetricsBucketBounds(t *testing.T) {
	r := newRig(t, nil)
	req, _ := http.NewRequest("GET", "http://mcpflow/metrics", nil)
	resp, err := r.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{
		`mcpflow_journal_commit_duration_seconds_bucket{le="0.0001"}`,
		`mcpflow_journal_commit_duration_seconds_bucket{le="0.0003"}`,
		`mcpflow_journal_commit_duration_seconds_bucket{le="0.0009"}`,
		`mcpflow_journal_commit_duration_seconds_bucket{le="0.0027"}`,
		`mcpflow_journal_commit_duration_seconds_bucket{le="0.2187"}`,
		`mcpflow_journal_commit_duration_seconds_bucket{le="1.9683"}`,
		`mcpflow_journal_commit_duration_seconds_bucket{le="+Inf"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// No bound anywhere carries a float's rounding error.
	for _, m := range regexp.MustCompile(`le="([^"]+)"`).FindAllStringSubmatch(text, -1) {
		if digits := strings.TrimLeft(strings.NewReplacer(".", "", "+Inf", "").Replace(m[1]), "0"); len(digits) > 8 {
			t.Errorf("bound le=%q is not a short decimal", m[1])
		}
	}
}

package workersbench

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
	"github.com/mcpflow/mcpflow/journal/postgres"
)

var (
	runs    = flag.Int("workers-runs", 300, "runs submitted before the workers start")
	steps   = flag.Int("workers-steps", 10, "steps of each run, each a call of the demo server's upper tool")
	delay   = flag.Duration("workers-delay", 50*time.Millisecond, "how long the demo server takes over each call (MCPFLOW_DEMO_DELAY)")
	maxRuns = flag.Int("workers-max-runs", 32, "each worker's --max-runs")
	bin     = flag.String("workers-bin", "", "the mcpflow binary to run (default: built from ../../cmd/mcpflow)")
)

// BenchmarkWorkers submits -workers-runs runs of -workers-steps steps to a
// fresh PostgreSQL journal, then starts one `mcpflow server` worker and
// times it until every run has succeeded; then the same on another fresh
// journal with three workers. The runs call `mcpflow demo-server` over
// streamable HTTP. Each iteration is one such pair; each figure is its
// median over the pairs (3w/1w the median of the pairs' own ratios), and
// -v logs every trial. On a machine whose load moves, take several pairs:
//
//	MCPFLOW_TEST_POSTGRES=postgres://... go test -run '^$' -bench Workers -benchtime 3x
func BenchmarkWorkers(b *testing.B) {
	journaltest.RequirePostgres(b)
	exe := *bin
	if exe == "" {
		exe = filepath.Join(b.TempDir(), "mcpflow")
		build := exec.Command("go", "build", "-o", exe, "../../cmd/mcpflow")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
	}
	e := &env{b: b, exe: exe, workspace: b.TempDir(), config: b.TempDir(), key: journal.NewKey().Encode()}
	e.base = []string{"NO_COLOR=1", "XDG_CONFIG_HOME=" + e.config, journal.KeyEnv + "=" + e.key, "MCPFLOW_DEMO_DELAY=" + delay.String()}
	if out, err := e.command("trust", "add").CombinedOutput(); err != nil {
		b.Fatalf("trust add: %v\n%s", err, out)
	}
	url := e.demoServer()
	wf := filepath.Join(e.workspace, "chain.yaml")
	var src strings.Builder
	fmt.Fprintf(&src, "name: chain\nservers:\n  s: {url: %q, trust: true}\nsteps:\n", url)
	for i := range *steps {
		fmt.Fprintf(&src, "  - {id: s%d, server: s, tool: upper, with: {text: s%d}}\n", i, i)
	}
	if err := os.WriteFile(wf, []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}

	var ones, threes []trial
	for b.Loop() {
		ones = append(ones, e.trial(wf, 1))
		threes = append(threes, e.trial(wf, 3))
	}
	of := func(ts []trial, f func(trial) float64) float64 {
		vs := make([]float64, len(ts))
		for i, t := range ts {
			vs[i] = f(t)
		}
		return median(vs)
	}
	ratios := make([]float64, len(ones))
	for i := range ones {
		ratios[i] = threes[i].stepsPerSec() / ones[i].stepsPerSec()
	}
	b.ReportMetric(of(ones, trial.stepsPerSec), "1w-steps/s")
	b.ReportMetric(of(threes, trial.stepsPerSec), "3w-steps/s")
	if len(ratios) > 1 {
		b.Logf("3w/1w of each pair: %.3f", ratios)
	}
	b.ReportMetric(median(ratios), "3w/1w")
	b.ReportMetric(of(ones, func(t trial) float64 { return t.workerCPU }), "1w-worker-cpu")
	b.ReportMetric(of(ones, func(t trial) float64 { return t.busy }), "1w-machine-busy")
	b.ReportMetric(of(ones, func(t trial) float64 { return t.pgCPU }), "1w-pg-cpu")
	b.ReportMetric(of(threes, func(t trial) float64 { return t.pgCPU }), "3w-pg-cpu")
	b.ReportMetric(of(threes, func(t trial) float64 { return t.workerCPU }), "3w-worker-cpu")
	b.ReportMetric(of(threes, func(t trial) float64 { return t.busy }), "3w-machine-busy")
	b.ReportMetric(of(threes, func(t trial) float64 { return t.firstStep.Seconds() }), "3w-first-step-s")
	b.ReportMetric(of(threes, func(t trial) float64 { return t.lastFirstStep.Seconds() }), "3w-last-first-step-s")
}

// median is the middle of vs (the mean of the two middle ones for an even
// count); vs is sorted in place.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// env is the workspace, configuration and demo server the trials share.
type env struct {
	b                           *testing.B
	exe, workspace, config, key string
	demo                        int      // the demo server's pid
	base                        []string // the environment of every command
}

func (e *env) command(args ...string) *exec.Cmd {
	cmd := exec.Command(e.exe, append([]string{"--workspace", e.workspace}, args...)...)
	cmd.Env = append(os.Environ(), e.base...)
	cmd.Dir = e.workspace
	return cmd
}

// demoServer starts `mcpflow demo-server --http` for the benchmark and
// returns its URL; it is killed when the benchmark ends.
func (e *env) demoServer() string {
	cmd := e.command("demo-server", "--http", "127.0.0.1:0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		e.b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.b.Fatal(err)
	}
	e.demo = cmd.Process.Pid
	urls := make(chan string, 1)
	drained := make(chan struct{})
	go func() { // owned by the cleanup below, which waits for it
		defer close(drained)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				select {
				case urls <- strings.TrimSpace(u):
				default:
				}
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	e.b.Cleanup(func() {
		cmd.Process.Kill()
		<-drained
		cmd.Wait()
	})
	select {
	case u := <-urls:
		return u
	case <-time.After(20 * time.Second):
		e.b.Fatal("demo-server said nothing of where it listens")
		return ""
	}
}

// trial is what one round of runs on n workers measured.
type trial struct {
	steps     int
	took      time.Duration
	workerCPU float64 // the workers' CPU time over the wall time, in cores
	busy      float64 // the machine's busy CPU over the wall time, in cores
	pgCPU     float64 // PostgreSQL's processes' CPU time over the wall time, in cores
	demoCPU   float64 // the demo server's, in cores

	// From the workers' start: when the runs' first steps began (the
	// earliest, the median, the last) and when the runs ended (the median).
	earliestStep, firstStep, lastFirstStep, medianEnd time.Duration
}

func (t trial) stepsPerSec() float64 { return float64(t.steps) / t.took.Seconds() }

// trial submits the runs to a fresh journal, starts n workers, and waits
// until every run has succeeded, each step called exactly once.
func (e *env) trial(wf string, n int) trial {
	b := e.b
	location := journaltest.PostgresURL(b)
	env := append([]string{"MCPFLOW_JOURNAL=" + location}, e.base...)

	// Submit every run, eight commands at a time, with no worker running.
	var wg sync.WaitGroup
	errs := make(chan error, *runs)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for range next {
				cmd := e.command("run", wf, "--detach")
				cmd.Env = append(cmd.Env, env...)
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("run --detach: %v\n%s", err, out)
				}
			}
		})
	}
	for i := range *runs {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	j, err := postgres.Open(context.Background(), location, &journal.Options{ReadOnly: true, Key: mustKey(b, e.key)})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()

	// Start the workers and time them until no run is running.
	start, busy0, pg0, demo0 := time.Now(), machineBusy(), postgresCPU(), processCPU(e.demo)
	var procs []*exec.Cmd
	var logs []*bytes.Buffer
	for i := range n {
		cmd := e.command("server", "--worker-id", fmt.Sprintf("w%d", i+1), "--socket", filepath.Join(b.TempDir(), "w.sock"),
			"--max-runs", strconv.Itoa(*maxRuns), "--grace", "1s")
		cmd.Env = append(cmd.Env, env...)
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs, logs = append(procs, cmd), append(logs, &log)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		for i, p := range procs {
			if err := p.Wait(); err != nil {
				b.Errorf("worker w%d: %v\n%s", i+1, err, logs[i])
			}
		}
	}
	defer stop()
	deadline := start.Add(10 * time.Minute)
	for {
		left, _, err := j.CountRuns(journal.RunFilter{Status: journal.RunRunning}, *runs)
		if err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d runs of %d still running after %v", left, *runs, time.Since(start))
		}
		time.Sleep(25 * time.Millisecond)
	}
	t := trial{steps: *runs * *steps, took: time.Since(start)}
	t.busy = (machineBusy() - busy0).Seconds() / t.took.Seconds()
	t.pgCPU = (postgresCPU() - pg0).Seconds() / t.took.Seconds()
	t.demoCPU = (processCPU(e.demo) - demo0).Seconds() / t.took.Seconds()
	var cpu time.Duration
	for _, p := range procs {
		cpu += processCPU(p.Process.Pid)
	}
	t.workerCPU = cpu.Seconds() / t.took.Seconds()
	stop()

	// Each run was claimed once: no worker took a run from another.
	claims := 0
	for _, l := range logs {
		claims += strings.Count(l.String(), "claimed run ")
	}
	if claims != *runs {
		for i, l := range logs {
			b.Logf("worker w%d:\n%s", i+1, l)
		}
		b.Fatalf("%d claims of %d runs", claims, *runs)
	}

	// Every run succeeded, every step of it called once.
	all, err := j.Runs(journal.RunFilter{})
	if err != nil {
		b.Fatal(err)
	}
	if len(all) != *runs {
		b.Fatalf("%d runs journaled, want %d", len(all), *runs)
	}
	for _, r := range all {
		if r.Status != journal.RunSucceeded {
			b.Fatalf("run %s is %s: %+v", r.ID.Short(), r.Status, r.Error)
		}
	}
	invs, err := j.Invocations(journal.Filter{State: journal.StateCompleted})
	if err != nil {
		b.Fatal(err)
	}
	if len(invs) != *runs**steps {
		b.Fatalf("%d completed calls, want %d", len(invs), *runs**steps)
	}
	first := map[journal.ID]time.Time{}
	for _, inv := range invs {
		if at, ok := first[inv.RunID]; !ok || inv.CreatedAt.Before(at) {
			first[inv.RunID] = inv.CreatedAt
		}
	}
	var firsts, ends []time.Duration
	for _, r := range all {
		firsts = append(firsts, first[r.ID].Sub(start))
		if r.FinishedAt != nil {
			ends = append(ends, r.FinishedAt.Sub(start))
		}
	}
	slices.Sort(firsts)
	slices.Sort(ends)
	t.earliestStep, t.firstStep, t.lastFirstStep = firsts[0], firsts[len(firsts)/2], firsts[len(firsts)-1]
	if len(ends) > 0 {
		t.medianEnd = ends[len(ends)/2]
	}
	b.Logf("%d worker(s): %d steps in %v: %.0f steps/s, workers %.2f cores, PostgreSQL %.2f, demo server %.2f, machine %.2f cores busy; first steps began from %v, at %v (median), the last at %v; runs ended at %v (median)",
		n, t.steps, t.took.Round(time.Millisecond), t.stepsPerSec(), t.workerCPU, t.pgCPU, t.demoCPU, t.busy,
		t.earliestStep.Round(time.Millisecond), t.firstStep.Round(time.Millisecond), t.lastFirstStep.Round(time.Millisecond), t.medianEnd.Round(time.Millisecond))
	return t
}

func mustKey(b *testing.B, s string) *journal.Key {
	k, err := journal.ParseKey(s)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// clockTicks is USER_HZ, the unit of /proc's CPU times on Linux.
const clockTicks = 100

// processCPU is the user and system CPU time pid has used, from
// /proc/PID/stat (0 when it cannot be read).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// postgresCPU is the CPU time of the processes named postgres now running
// (the database's backends, of every client, and its own processes).
func postgresCPU() time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var sum time.Duration
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		sum += processCPU(pid)
	}
	return sum
}

// machineBusy is the CPU time all cores have spent not idle since boot,
// from /proc/stat (0 when it cannot be read).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i == 3 || i == 4 || i >= 7 { // idle, iowait; guest times are counted in user already
			continue
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTicks
}

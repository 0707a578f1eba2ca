package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The time a call and a run took, as runs show, journal show and the line
// that ends a run say it: a call's time is its attempts' (an attempt
// mcpflow stopped during is interrupted, its time unknown, never counted
// up to the resume), a run's is work and wall time, with the gaps.

// goldenRun compares the output of mcpflow args, run as a child process,
// with testdata/golden/name.txt.
func goldenRun(t *testing.T, c *cli, name string, args ...string) result {
	t.Helper()
	r := c.run(args...)
	got := fmt.Sprintf("$ mcpflow %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	got = strings.ReplaceAll(got, " "+osUser()+" approved ", " <USER> approved ")
	checkGolden(t, name, normalize(got, c.workspace, c.config))
	return r
}

// durationOf reads the duration the first submatch of re finds in s.
func durationOf(t *testing.T, re, s string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in:\n%s", re, s)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("%s: %v", m[1], err)
	}
	return d
}

// TestDurationsAfterACrash: mcpflow is killed while a call is in flight,
// and the run resumed (the call replayed) some seconds later. The call's
// first attempt is interrupted, not "ended after" the seconds until the
// resume; the call took its replay's time; the run shows its work and
// wall time and the gap, mcpflow stopped.
func TestDurationsAfterACrash(t *testing.T) {
	const down = 3 * time.Second
	c := newCLI(t)
	id := crashDuringCall(t, c, "trusted", "upper", true)
	time.Sleep(down)

	r := goldenRun(t, c, "durations-crash-resume", "resume", id.String(), "--trust-workspace")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if wall, work := durationOf(t, `succeeded in (\S+) \(work`, r.stdout), durationOf(t, `\(work (\S+), waited`, r.stdout); wall < down || work >= down {
		t.Errorf("the run's wall time %v, work %v: want the %v mcpflow was down in the wall time, not in the work", wall, work, down)
	}

	r = goldenRun(t, c, "durations-crash-runs-show", "runs", "show", id.String())
	if d := durationOf(t, `(?m)^call .* completed +2 \(1 replay\) +(\S+) \+ 1 interrupted`, r.stdout); d >= down {
		t.Errorf("the call took %v, which counts the time mcpflow was down (%v)", d, down)
	}
	if d := durationOf(t, `(?m)^  \+\S+ +(\S+) +stopped: mcpflow stopped while step call was in flight`, r.stdout); d < down {
		t.Errorf("the gap mcpflow was down lasts %v, want at least %v", d, down)
	}

	inv := regexp.MustCompile(`(?m)^call +([0-9a-f-]+) `).FindStringSubmatch(r.stdout)
	if inv == nil {
		t.Fatalf("no invocation of step call in:\n%s", r.stdout)
	}
	r = goldenRun(t, c, "durations-crash-journal-show", "journal", "show", inv[1])
	if strings.Contains(strings.SplitN(r.stdout, "\n  2 ", 2)[0], "ended after") {
		t.Errorf("the interrupted attempt reads as ended after some time:\n%s", r.stdout)
	}
}

// TestDurationsWithAnApproval: a run waits for an approval, given a moment
// later; resumed, it shows its wall time, its work time and the wait.
func TestDurationsWithAnApproval(t *testing.T) {
	const wait = 1500 * time.Millisecond
	c := newCLI(t)
	wf := c.workflow("ship.yaml", `name: ship
servers:
  demo: {builtin: demo}
steps:
  - {id: build, server: demo, tool: greet, with: {name: build}}
  - {id: deploy, server: demo, tool: greet, approve: "Ship it?", with: {name: deploy}}
`)
	r := c.run("run", wf)
	if r.code != exitBlocked {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := regexp.MustCompile(`run ([0-9a-f-]{36}) started`).FindStringSubmatch(r.stdout)
	if id == nil {
		t.Fatalf("no run id in:\n%s", r.stdout)
	}
	time.Sleep(wait)
	if r := c.run("approve", id[1], "deploy", "--reason", "go", "--no-continue"); r.code != 0 {
		t.Fatalf("approve: exit %d\n%s", r.code, r.stderr)
	}
	r = goldenRun(t, c, "durations-approval-resume", "resume", id[1])
	if wall, waited := durationOf(t, `succeeded in (\S+) \(work`, r.stdout), durationOf(t, `, waited (\S+)\)`, r.stdout); wall < wait || waited < wait {
		t.Errorf("wall %v, waited %v: want both at least the %v the approval took", wall, waited, wait)
	}
	r = goldenRun(t, c, "durations-approval-runs-show", "runs", "show", id[1])
	if work, wall := durationOf(t, `(?m)^Time: +work (\S+), wall`, r.stdout), durationOf(t, `(?m)^Time: .*, wall (\S+),`, r.stdout); work >= wait || wall < wait {
		t.Errorf("work %v, wall %v: want the approval's %v in the wall time only", work, wall, wait)
	}
}

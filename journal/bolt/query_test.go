package bolt_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

func mustID(t *testing.T, s string) journal.ID {
	t.Helper()
	id, err := journal.ParseID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestFindByPrefix(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		ids := []journal.ID{
			mustID(t, "01900000-0000-7000-8000-000000000001"),
			mustID(t, "01900000-0000-7000-8000-000000000002"),
			mustID(t, "0191abcd-0000-7000-8000-000000000003"),
		}
		for _, id := range ids {
			if err := j.CreateRun(&journal.Run{ID: id, Workflow: "wf"}); err != nil {
				t.Fatal(err)
			}
			if err := j.Skip(&journal.Invocation{ID: id, RunID: id, Step: "s"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			prefix string
			want   journal.ID
			err    error
		}{
			{ids[0].String(), ids[0], nil},
			{strings.ToUpper(ids[2].String()), ids[2], nil},
			{"0191", ids[2], nil},
			{"0191abcd-00", ids[2], nil},                // with a dash
			{"0-1-9-1", ids[2], nil},                    // dashes anywhere
			{"0191a", ids[2], nil},                      // odd length
			{"019", journal.ID{}, journal.ErrAmbiguous}, // odd length, several
			{"0190", journal.ID{}, journal.ErrAmbiguous},
			{"0190000000007000800000000000000", journal.ID{}, journal.ErrAmbiguous}, // 31 digits
			{"01900000000070008000000000000002", ids[1], nil},
			{"0192", journal.ID{}, journal.ErrNotFound},
			{"0191b", journal.ID{}, journal.ErrNotFound},
			{"1", journal.ID{}, journal.ErrNotFound},
		} {
			for _, find := range []func(string) (journal.ID, error){j.FindRun, j.FindInvocation} {
				got, err := find(c.prefix)
				if got != c.want || !errors.Is(err, c.err) {
					t.Errorf("find(%q) = %s, %v; want %s, %v", c.prefix, got, err, c.want, c.err)
				}
			}
		}
		for _, bad := range []string{"", "-", "xyz", "0190g", strings.Repeat("0", 33)} {
			if _, err := j.FindRun(bad); err == nil || errors.Is(err, journal.ErrNotFound) {
				t.Errorf("FindRun(%q) = %v, want an invalid-id error", bad, err)
			}
		}
	})
}

func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	prev := journal.ID{}
	for range 10000 {
		id := journal.NewID()
		u := uuid.UUID(id)
		if u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: version %d, variant %v", id, u.Version(), u.Variant())
		}
		// Strictly increasing, and the short form the CLI prints is unique
		// among the ids one process makes.
		if bytes.Compare(prev[:], id[:]) >= 0 || seen[id.Short()] || len(id.Short()) != 18 {
			t.Fatalf("id %s after %s (short %s seen: %v)", id, prev, id.Short(), seen[id.Short()])
		}
		seen[id.Short()] = true
		prev = id
	}
	if d := time.Since(prev.Time()); d < -time.Second || d > time.Minute {
		t.Errorf("id time %v", prev.Time())
	}
	if p, err := journal.ParseID(prev.String()); err != nil || p != prev {
		t.Errorf("ParseID: %v %v", p, err)
	}
}

// clock is a fake clock that advances one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// listFixture writes 3 runs × 20 invocations over 2 servers × 2 tools in
// four states, with a clock that advances one second per write.
func listFixture(t *testing.T, location string) (journal.Store, []journal.ID, time.Time) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: t0}
	j := journaltest.OpenStore(t, location, &journal.Options{Now: c.now})
	var runs []journal.ID
	for r := range 3 {
		run := newRun(t, j)
		runs = append(runs, run)
		for i := range 20 {
			in := begin(t, j, run, []string{"fs", "git"}[i%2], []string{"read", "write"}[(i/2)%2])
			switch (i + r) % 4 {
			case 0:
				finish(t, j, in, done)
			case 1:
				finish(t, j, in, failed)
			case 2:
				finish(t, j, in, unknown)
			}
		}
	}
	return j, runs, t0
}

func ids(invs []journal.Invocation) []journal.ID {
	var out []journal.ID
	for _, inv := range invs {
		out = append(out, inv.ID)
	}
	return out
}

func TestInvocationsFiltersAndCursor(t *testing.T) {
	t.Parallel()
	journaltest.EachLocation(t, func(t *testing.T, location string) {
		j, runs, t0 := listFixture(t, location)
		all, err := j.Invocations(journal.Filter{})
		if err != nil || len(all) != 60 {
			t.Fatalf("all: %d, %v", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if bytes.Compare(all[i-1].ID[:], all[i].ID[:]) <= 0 || all[i-1].CreatedAt.Before(all[i].CreatedAt) {
				t.Fatalf("not newest first at %d", i)
			}
		}
		mid := all[30].CreatedAt
		cases := []struct {
			name string
			f    journal.Filter
			keep func(journal.Invocation) bool
			want int
		}{
			{"run", journal.Filter{Run: runs[1]}, func(v journal.Invocation) bool { return v.RunID == runs[1] }, 20},
			{"state", journal.Filter{State: unknown}, func(v journal.Invocation) bool { return v.State == unknown }, 15},
			{"state not indexed", journal.Filter{State: done}, func(v journal.Invocation) bool { return v.State == done }, -1},
			{"state not indexed, since", journal.Filter{State: done, Since: mid}, func(v journal.Invocation) bool { return v.State == done && !v.CreatedAt.Before(mid) }, -1},
			{"server", journal.Filter{Server: "git"}, func(v journal.Invocation) bool { return v.Server == "git" }, 30},
			{"tool", journal.Filter{Tool: "write"}, func(v journal.Invocation) bool { return v.Tool == "write" }, 30},
			{"since", journal.Filter{Since: mid}, func(v journal.Invocation) bool { return !v.CreatedAt.Before(mid) }, 31},
			{"until", journal.Filter{Until: mid}, func(v journal.Invocation) bool { return v.CreatedAt.Before(mid) }, 29},
			{"server+tool", journal.Filter{Server: "fs", Tool: "read"}, func(v journal.Invocation) bool { return v.Server == "fs" && v.Tool == "read" }, 15},
			{"run+state", journal.Filter{Run: runs[0], State: intent}, func(v journal.Invocation) bool { return v.RunID == runs[0] && v.State == intent }, 5},
			{"state+server+tool", journal.Filter{State: done, Server: "git", Tool: "write"}, func(v journal.Invocation) bool {
				return v.State == done && v.Server == "git" && v.Tool == "write"
			}, -1},
			{"server+state+since", journal.Filter{Server: "fs", State: failed, Since: mid}, func(v journal.Invocation) bool {
				return v.Server == "fs" && v.State == failed && !v.CreatedAt.Before(mid)
			}, -1},
			{"run+since+until", journal.Filter{Run: runs[1], Since: t0.Add(30 * time.Second), Until: mid}, func(v journal.Invocation) bool {
				return v.RunID == runs[1] && !v.CreatedAt.Before(t0.Add(30*time.Second)) && v.CreatedAt.Before(mid)
			}, -1},
			{"nothing", journal.Filter{Server: "nope"}, func(journal.Invocation) bool { return false }, 0},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var want []journal.ID
				for _, v := range all {
					if c.keep(v) {
						want = append(want, v.ID)
					}
				}
				if c.want >= 0 && len(want) != c.want {
					t.Fatalf("fixture: %d match, want %d", len(want), c.want)
				}
				got, err := j.Invocations(c.f)
				if err != nil || !slices.Equal(ids(got), want) {
					t.Fatalf("got %d (%v), want %d", len(got), err, len(want))
				}
				// Page through with a cursor: every record once, newest first.
				const page = 4
				var paged []journal.ID
				f := c.f
				f.Limit = page
				pages := 0
				for {
					p, err := j.Invocations(f)
					if err != nil {
						t.Fatal(err)
					}
					if len(p) > page {
						t.Fatalf("page of %d", len(p))
					}
					if len(p) == 0 {
						break
					}
					pages++
					paged = append(paged, ids(p)...)
					f.Before = p[len(p)-1].ID
				}
				if !slices.Equal(paged, want) {
					t.Fatalf("paged %d records in %d pages, want %d", len(paged), pages, len(want))
				}
				if len(want) > 3*page && pages <= 3 {
					t.Fatalf("%d pages", pages)
				}
			})
		}
	})
}

func TestRunsNewestFirstWithStatusAndCursor(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		var want []journal.ID
		for i := range 10 {
			id := newRun(t, j)
			if i%2 == 0 {
				if err := j.SetRunStatus(id, journal.RunFailed, nil); err != nil {
					t.Fatal(err)
				}
				want = append([]journal.ID{id}, want...)
			}
		}
		runs, err := j.Runs(journal.RunFilter{Status: journal.RunFailed})
		if err != nil || len(runs) != 5 {
			t.Fatalf("%d, %v", len(runs), err)
		}
		var got []journal.ID
		for _, r := range runs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("failed runs %v, want %v", got, want)
		}
		page, err := j.Runs(journal.RunFilter{Status: journal.RunFailed, Before: want[1], Limit: 2})
		if err != nil || len(page) != 2 || page[0].ID != want[2] || page[1].ID != want[3] {
			t.Errorf("page after %s: %v %v", want[1], page, err)
		}
		all, _ := j.Runs(journal.RunFilter{Limit: 3})
		if len(all) != 3 || bytes.Compare(all[0].ID[:], all[1].ID[:]) <= 0 {
			t.Errorf("limit 3: %d", len(all))
		}
	})
}

func TestRecordsHoldWhatWasWritten(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		r := &journal.Run{Workflow: "deploy", Definition: []byte("name: deploy\n"), Source: "deploy.yaml",
			Inputs: map[string]any{"env": "prod", "token": "[redacted]"}, Workspace: "/work"}
		if err := j.CreateRun(r); err != nil {
			t.Fatal(err)
		}
		got, err := j.Run(r.ID)
		if err != nil || got.Workflow != "deploy" || string(got.Definition) != "name: deploy\n" || got.Digest != journal.Digest(r.Definition) ||
			got.Inputs["token"] != "[redacted]" || got.Workspace != "/work" || got.Status != journal.RunRunning || got.StartedAt.IsZero() {
			t.Fatalf("run: %+v, %v", got, err)
		}
		args := []byte(`{"q":"` + strings.Repeat("x", 100) + `"}`)
		inv := &journal.Invocation{RunID: r.ID, Step: "fetch", Item: 2, Server: "web", Tool: "get",
			Arguments: journal.CapJSON(args, 64), ArgumentsDigest: journal.Digest(args),
			Annotations: []byte(`{"readOnlyHint":true}`), Trust: journal.Trust{Server: true, Workspace: true, WorkspaceSource: "flag"}}
		in, err := j.Begin(inv)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Finish(in, journal.Outcome{State: done, Result: &journal.Result{Content: journal.CapJSON([]byte(`[1,2,3]`), 1000), IsError: true}}); err != nil {
			t.Fatal(err)
		}
		v, err := j.Invocation(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v.RunID != r.ID || v.Step != "fetch" || v.Item != 2 || v.Server != "web" || v.Tool != "get" ||
			!strings.Contains(string(v.Arguments), `"truncated":true`) || v.ArgumentsDigest != journal.Digest(args) ||
			string(v.Annotations) != `{"readOnlyHint":true}` || v.Trust.WorkspaceSource != "flag" || v.IdempotencyKey != in.ID.String() ||
			v.State != done || len(v.Attempts) != 1 || v.Attempts[0].EndedAt == nil || v.Result == nil || !v.Result.IsError ||
			v.Attempts[0].Trust == nil || *v.Attempts[0].Trust != inv.Trust || string(v.Attempts[0].Annotations) != `{"readOnlyHint":true}` {
			t.Fatalf("invocation: %+v", v)
		}
		if err := j.CreateRun(&journal.Run{ID: r.ID}); !errors.Is(err, journal.ErrExists) {
			t.Errorf("duplicate run: %v", err)
		}
		if err := j.Skip(&journal.Invocation{ID: in.ID, RunID: r.ID}); !errors.Is(err, journal.ErrExists) {
			t.Errorf("skip over an existing invocation: %v", err)
		}
		if _, err := j.Begin(&journal.Invocation{RunID: journal.NewID()}); !errors.Is(err, journal.ErrNotFound) {
			t.Errorf("begin in a missing run: %v", err)
		}
		if _, err := j.Begin(&journal.Invocation{RunID: r.ID, Server: "a\x00b"}); err == nil {
			t.Error("server name with NUL accepted")
		}
	})
}

// lineWriter checks each line as Export writes it and measures the live
// heap once, deep into the export.
type lineWriter struct {
	t        *testing.T
	n        int
	last     []byte
	buf      []byte
	heapAt   int
	heapLive uint64
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		inv, err := journal.ParseInvocation(w.buf[:i])
		if err != nil {
			w.t.Fatalf("line %d: %v", w.n+1, err)
		}
		if w.last != nil && bytes.Compare(w.last, inv.ID[:]) >= 0 {
			w.t.Fatalf("line %d: not oldest first", w.n+1)
		}
		w.last = bytes.Clone(inv.ID[:])
		w.buf = w.buf[i+1:]
		w.n++
		if w.n == w.heapAt {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			w.heapLive = ms.HeapAlloc
		}
	}
	return len(p), nil
}

func TestExportStreamsEveryRecord(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.Each(t, &journal.Options{Now: c.now}, func(t *testing.T, j journal.Store) {
		const n = 3000
		payload := []byte(`{"blob":"` + strings.Repeat("y", 1500) + `"}`)
		run := newRun(t, j)
		var wg sync.WaitGroup
		for g := range 8 { // concurrent writers make this quick
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n / 8 {
					if _, err := j.Begin(&journal.Invocation{RunID: run, Step: fmt.Sprint(g), Server: "s", Tool: "t", Arguments: payload}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		w := &lineWriter{t: t, heapAt: n - 100}
		if err := j.Export(w, time.Time{}, false); err != nil {
			t.Fatal(err)
		}
		if w.n != n {
			t.Fatalf("exported %d lines, want %d", w.n, n)
		}
		total := uint64(n * len(payload))
		if w.heapLive > base && w.heapLive-base > total/4 {
			t.Errorf("live heap grew by %d KiB while exporting %d KiB: Export holds records", (w.heapLive-base)>>10, total>>10)
		}
		// Since: exactly the records created at or after a point in time.
		all, _ := j.Invocations(journal.Filter{})
		since := all[1000].CreatedAt
		w2 := &lineWriter{t: t}
		if err := j.Export(w2, since, false); err != nil || w2.n != 1001 {
			t.Errorf("export since: %d lines, %v; want 1001", w2.n, err)
		}
	})
}

// TestExportItemNull: a plain step's item is exported null, as every other
// JSON output has it, and reads back as a plain step; a fan-out item keeps
// its index; a step name or arguments spelling the field are left alone.
func TestExportItemNull(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		run := newRun(t, j)
		args := []byte(`{"x":{"item":-1,"y":1}}`)
		for _, inv := range []journal.Invocation{
			{RunID: run, Step: `a,"item":-1,`, Item: -1, Server: "s", Tool: "t", Arguments: args},
			{RunID: run, Step: "b", Item: 2, Server: "s", Tool: "t", Arguments: args},
		} {
			if _, err := j.Begin(&inv); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if err := j.Export(&buf, time.Time{}, false); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("exported %d lines", len(lines))
		}
		for i, want := range []struct {
			field string
			item  int
		}{{`"item":null`, -1}, {`"item":2`, 2}} {
			if !strings.Contains(lines[i], want.field) || strings.Count(lines[i], `{"item":-1,`) != 1 {
				t.Errorf("line %d: want %s and the step and arguments as written\n%s", i, want.field, lines[i])
			}
			inv, err := journal.ParseInvocation([]byte(lines[i]))
			if err != nil || inv.Item != want.item || string(inv.Arguments) != string(args) {
				t.Errorf("line %d reads back as item %v, arguments %s (%v), want item %d", i, inv.Item, inv.Arguments, err, want.item)
			}
		}
	})
}

// TestCounts: counts agree with the lists they tell the length of, for
// every index (and from a cursor), stop at the bound, and runs filter by
// workflow and start time.
func TestCounts(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.Each(t, &journal.Options{Now: c.now}, func(t *testing.T, j journal.Store) {
		var runs []journal.ID
		for i, wf := range []string{"a", "b", "a"} {
			r := &journal.Run{Workflow: wf, Definition: []byte("name: " + wf + "\n")}
			if err := j.CreateRun(r); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r.ID)
			for k := range 4 + i {
				in := begin(t, j, r.ID, "srv", []string{"x", "y"}[k%2])
				if k%3 == 0 {
					finish(t, j, in, journal.StateCompleted)
				}
			}
			c.t = c.t.Add(time.Hour)
		}
		for i, st := range []journal.RunStatus{journal.RunRunning, journal.RunFailed, journal.RunRunning} {
			if err := j.SetRunStatus(runs[i], st, nil); err != nil {
				t.Fatal(err)
			}
		}
		all, _ := j.Invocations(journal.Filter{})
		for _, f := range []journal.Filter{
			{}, {Run: runs[1]}, {State: journal.StateIntent}, {Server: "srv", Tool: "y"}, {Server: "srv"},
			{Run: runs[2], State: journal.StateCompleted}, {Since: c.t.Add(-90 * time.Minute)}, {Before: all[4].ID},
			{State: journal.StateCompleted, Before: all[1].ID},
		} {
			list, err := j.Invocations(f)
			if err != nil {
				t.Fatal(err)
			}
			n, more, err := j.CountInvocations(f, 100)
			if err != nil || n != len(list) || more {
				t.Errorf("%+v: counted %d (more %v, %v), listed %d", f, n, more, err, len(list))
			}
		}
		if n, more, _ := j.CountInvocations(journal.Filter{}, 5); n != 5 || !more {
			t.Errorf("bounded count: %d, more %v; want 5, true", n, more)
		}
		for _, tc := range []struct {
			f    journal.RunFilter
			want []journal.ID
		}{
			{journal.RunFilter{Workflow: "a"}, []journal.ID{runs[2], runs[0]}},
			{journal.RunFilter{Since: runs[1].Time()}, []journal.ID{runs[2], runs[1]}},
			{journal.RunFilter{Workflow: "a", Before: runs[2]}, []journal.ID{runs[0]}},
			{journal.RunFilter{}, []journal.ID{runs[2], runs[1], runs[0]}},
			{journal.RunFilter{Before: runs[2]}, []journal.ID{runs[1], runs[0]}},
			{journal.RunFilter{Before: runs[1]}, []journal.ID{runs[0]}},
			{journal.RunFilter{Status: journal.RunRunning}, []journal.ID{runs[2], runs[0]}},
			{journal.RunFilter{Status: journal.RunRunning, Before: runs[2]}, []journal.ID{runs[0]}},
			{journal.RunFilter{Status: journal.RunFailed}, []journal.ID{runs[1]}},
		} {
			list, _ := j.Runs(tc.f)
			var got []journal.ID
			for _, r := range list {
				got = append(got, r.ID)
			}
			n, more, err := j.CountRuns(tc.f, 100)
			if !slices.Equal(got, tc.want) || n != len(tc.want) || more || err != nil {
				t.Errorf("%+v: listed %v, counted %d (%v); want %v", tc.f, got, n, err, tc.want)
			}
		}
		if n, more, _ := j.CountRuns(journal.RunFilter{}, 2); n != 2 || !more {
			t.Errorf("bounded count of runs: %d, more %v; want 2, true", n, more)
		}
	})
}

// TestCountCompleted: completed invocations, which the state index leaves
// out, are counted exactly, and up to a bound, among invocations in every
// other state, and a legacy entry of the state index for a completed
// invocation does not count twice.
func TestCountCompleted(t *testing.T) {
	j := journaltest.Open(t, nil)
	run := newRun(t, j)
	completed := 0
	for i := range 40 {
		in := begin(t, j, run, "srv", "t")
		switch st := []journal.State{intent, done, failed, unknown, aborted, timedOut}[i%6]; st {
		case intent:
		case done:
			finish(t, j, in, done)
			completed++
			if completed == 1 {
				if err := j.PutStrayStateKey(done, in.ID, false); err != nil {
					t.Fatal(err)
				}
			}
		default:
			finish(t, j, in, st)
		}
	}
	list, err := j.Invocations(journal.Filter{State: done})
	if err != nil || len(list) != completed {
		t.Fatalf("listed %d completed (%v), made %d", len(list), err, completed)
	}
	for _, c := range []struct {
		most, want int
		more       bool
	}{{100, completed, false}, {completed, completed, false}, {completed - 1, completed - 1, true}, {0, 0, true}, {math.MaxInt, completed, false}} {
		if n, more, err := j.CountInvocations(journal.Filter{State: done}, c.most); n != c.want || more != c.more || err != nil {
			t.Errorf("at most %d: counted %d, more %v (%v); want %d, %v", c.most, n, more, err, c.want, c.more)
		}
	}
}

// TestAmbiguousPrefixNamesCandidates: an id prefix that matches several
// records names them, in order, five at the most, as git does.
func TestAmbiguousPrefixNamesCandidates(t *testing.T) {
	journaltest.Each(t, nil, func(t *testing.T, j journal.Store) {
		var ids []journal.ID
		for i := 1; i <= 7; i++ {
			id := mustID(t, fmt.Sprintf("01930000-0000-7000-8000-00000000000%d", i))
			if err := j.CreateRun(&journal.Run{ID: id, Workflow: "wf"}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		_, err := j.FindRun("0193")
		if !errors.Is(err, journal.ErrAmbiguous) {
			t.Fatalf("FindRun: %v, want ErrAmbiguous", err)
		}
		var want []string
		for _, id := range ids[:5] {
			want = append(want, id.String())
		}
		if !strings.Contains(err.Error(), strings.Join(want, ", ")+", …") || strings.Contains(err.Error(), ids[5].String()) {
			t.Errorf("FindRun(0193): %v; want the first five ids, then …", err)
		}
		_, err = j.FindRun(ids[0].String()[:35])
		if !errors.Is(err, journal.ErrAmbiguous) || !strings.Contains(err.Error(), ids[0].String()+", "+ids[1].String()+", ") {
			t.Errorf("FindRun of a longer prefix: %v", err)
		}
	})
}

// TestRunsSinceIDMadeBefore: a run whose id was made a moment before its
// creation (Writer.NewRunID, as the engine makes it) is listed by a
// filter since its start, though its id's time is before that.
func TestRunsSinceIDMadeBefore(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	journaltest.Each(t, &journal.Options{Now: c.now}, func(t *testing.T, j journal.Store) {
		run := &journal.Run{Workflow: "w", ID: j.(interface{ NewRunID() journal.ID }).NewRunID()}
		if err := j.CreateRun(run); err != nil {
			t.Fatal(err)
		}
		if !run.ID.Time().Before(run.StartedAt) {
			t.Fatalf("the id's time %v is not before the run's start %v: the test proves nothing", run.ID.Time(), run.StartedAt)
		}
		list, err := j.Runs(journal.RunFilter{Since: run.StartedAt})
		if err != nil || len(list) != 1 || list[0].ID != run.ID {
			t.Fatalf("runs since the run's start: %v %v, want the run", list, err)
		}
		if n, _, err := j.CountRuns(journal.RunFilter{Since: run.StartedAt}, 10); n != 1 || err != nil {
			t.Fatalf("count of runs since the run's start: %d %v, want 1", n, err)
		}
	})
}

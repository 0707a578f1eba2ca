package bolt_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/journal/bolt"
	"github.com/mcpflow/mcpflow/journal/journaltest"
)

// BenchmarkIntentOutcome measures one journaled call: Begin (the durable
// intent) then Finish (the durable outcome), on a real file with the
// default fsync, by 1 or 64 concurrent writers.
func BenchmarkIntentOutcome(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			j := journaltest.Open(b, nil)
			run := newRun(b, j)
			c0 := j.Commits()
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < b.N; i += writers {
						in, err := j.Begin(&journal.Invocation{RunID: run, Step: "s", Item: -1, Server: "srv", Tool: "t", Arguments: []byte(`{"a":1}`)})
						if err == nil {
							err = j.Finish(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: []byte(`[]`)}})
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(j.Commits()-c0)/float64(b.N), "commits/op")
		})
	}
}

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixturePath string
	fixtureErr  error
)

// fixture is a journal of 1,000,000 completed invocations (10,000 runs of
// 100), built once per test binary with raw bbolt puts. With
// MCPFLOW_BENCH_FIXTURE=PATH it is built there once and kept, to time the
// CLI on it:
//
//	MCPFLOW_BENCH_FIXTURE=/tmp/1m.db go test ./journal -run '^$' -bench OpenList -benchtime 1x
//	time mcpflow journal list --journal /tmp/1m.db
func fixture(b *testing.B) string {
	if testing.Short() {
		b.Skip("builds a 1,000,000-invocation journal")
	}
	fixtureOnce.Do(func() {
		if fixturePath = os.Getenv("MCPFLOW_BENCH_FIXTURE"); fixturePath != "" {
			if _, err := os.Stat(fixturePath); err == nil {
				return
			}
		} else {
			if fixtureDir, fixtureErr = os.MkdirTemp("", "journal-bench-"); fixtureErr != nil {
				return
			}
			fixturePath = filepath.Join(fixtureDir, "journal.db")
		}
		start := time.Now()
		_, fixtureErr = bolt.BuildFixture(fixturePath, 10_000, 100)
		st, _ := os.Stat(fixturePath)
		if fixtureErr == nil {
			b.Logf("fixture: 1,000,000 invocations, %d MiB, built in %v", st.Size()>>20, time.Since(start).Round(time.Millisecond))
		}
	})
	if fixtureErr != nil {
		b.Fatal(fixtureErr)
	}
	return fixturePath
}

func removeFixture() {
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
}

// BenchmarkListNewest50 lists the newest 50 of 1,000,000 invocations.
func BenchmarkListNewest50(b *testing.B) {
	path := fixture(b)
	j := journaltest.OpenPath(b, path, &journal.Options{ReadOnly: true})

	for b.Loop() {
		invs, err := j.Invocations(journal.Filter{Limit: 50})
		if err != nil || len(invs) != 50 {
			b.Fatalf("%d, %v", len(invs), err)
		}
	}
}

// BenchmarkOpenList is what `mcpflow journal list` does on a journal of
// 1,000,000 invocations: open it read-only, list the newest 50, close.
func BenchmarkOpenList(b *testing.B) {
	path := fixture(b)
	for b.Loop() {
		j, err := bolt.Open(path, &journal.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		invs, err := j.Invocations(journal.Filter{Limit: 50})
		if err != nil || len(invs) != 50 {
			b.Fatalf("%d, %v", len(invs), err)
		}
		j.Close()
	}
}

// BenchmarkExport exports all 1,000,000 invocations; it reports
// invocations per second and the peak heap in use while exporting.
func BenchmarkExport(b *testing.B) {
	path := fixture(b)
	j := journaltest.OpenPath(b, path, &journal.Options{ReadOnly: true})
	var peak uint64
	for b.Loop() {
		w := &countingWriter{}
		stop := sampleHeap(&peak)
		err := j.Export(w, time.Time{}, false)
		stop()
		if err != nil || w.lines != 1_000_000 {
			b.Fatalf("%d lines, %v", w.lines, err)
		}
	}
	b.ReportMetric(float64(b.N)*1e6/b.Elapsed().Seconds(), "invocations/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

type countingWriter struct{ lines int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// sampleHeap records the largest HeapInuse seen until stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

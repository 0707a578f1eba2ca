package journal

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"
)

// TestGroupCommitFailingWriteInBatch queues ten writes behind a held commit
// token, so that they form one batch, with the fifth failing: it alone gets
// its error, the nine others are committed together in one transaction.
func TestGroupCommitFailingWriteInBatch(t *testing.T) {
	var mu sync.Mutex
	db := map[string]bool{} // what the commits kept
	var g GroupCommit[memTx]
	g.Init(func(fns []func(memTx) error) (int, error) {
		tx := memTx{}
		for i, fn := range fns {
			if err := fn(tx); err != nil {
				return i, err // rolled back: nothing of tx is kept
			}
		}
		mu.Lock()
		maps.Copy(db, tx)
		mu.Unlock()
		return -1, nil
	})
	g.token <- struct{}{} // a commit "in progress"
	boom := errors.New("boom")
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.Do(func(tx memTx) error {
				if i == 5 {
					tx["bad"] = true
					return boom
				}
				tx[fmt.Sprintf("k%d", i)] = true
				return nil
			})
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		n := len(g.pending)
		g.mu.Unlock()
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued", n)
		}
	}
	<-g.token
	wg.Wait()
	for i, err := range errs {
		if want := error(nil); i == 5 {
			if !errors.Is(err, boom) {
				t.Errorf("write 5: %v, want boom", err)
			}
		} else if err != want {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if c, w := g.Commits.Load(), g.Writes.Load(); c != 1 || w != 9 {
		t.Errorf("%d commits of %d writes, want 1 of 9", c, w)
	}
	if n := len(db); n != 9 || db["bad"] {
		t.Errorf("%d keys kept (bad kept: %v), want 9", n, db["bad"])
	}
}

// memTx is a transaction of a map: the writes of a batch, kept only when
// every write in it succeeded.
type memTx map[string]bool

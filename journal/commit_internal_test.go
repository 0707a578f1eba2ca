package journal

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestGroupCommitFailingWriteInBatch queues ten writes behind a held commit
// token, so that they form one batch, with the fifth failing: it alone gets
// its error, the nine others are committed together in one transaction.
func TestGroupCommitFailingWriteInBatch(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	var g groupCommit[*bolt.Tx]
	g.init(func(fns []func(*bolt.Tx) error) (int, error) { return applyBolt(db, "raw.db", fns) })
	g.token <- struct{}{} // a commit "in progress"
	boom := errors.New("boom")
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.do(func(tx *bolt.Tx) error {
				if i == 5 {
					tx.Bucket([]byte("b")).Put([]byte("bad"), nil)
					return boom
				}
				return tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "k%d", i), nil)
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
	if c, w := g.commits.Load(), g.writes.Load(); c != 1 || w != 9 {
		t.Errorf("%d commits of %d writes, want 1 of 9", c, w)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("b"))
		if n := b.Stats().KeyN; n != 9 || b.Get([]byte("bad")) != nil {
			t.Errorf("%d keys (bad written: %v)", n, b.Get([]byte("bad")) != nil)
		}
		return nil
	})
}

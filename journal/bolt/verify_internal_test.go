package bolt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// TestWalkerReadsPagesAsTheFileHoldsThem: every page the walker reads is
// the file's bytes, a page that overflows into the pages after it
// included, whatever its depth's buffer held before (a larger page, or a
// smaller one).
func TestWalkerReadsPagesAsTheFileHoldsThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pages.db")
	const pageSize = 4096
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range 200 {
			// From a few bytes to about five pages, big and small mixed.
			v := bytes.Repeat([]byte{byte(i)}, 1+(i*7919)%20000)
			if err := b.Put(fmt.Appendf(nil, "k%03d", i), v); err != nil {
				return err
			}
		}
		small, err := tx.CreateBucket([]byte("small"))
		if err != nil {
			return err
		}
		for i := range 2000 {
			if err := small.Put(fmt.Appendf(nil, "k%04d", i), bytes.Repeat([]byte{'v'}, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hwm := uint64(len(file) / pageSize)
	w := &fileWalker{f: f, size: int64(len(file)), pageSize: pageSize, hwm: hwm, used: make([]uint64, hwm/64+1)}
	read, overflowing := 0, 0
	for id := uint64(2); id < hwm; {
		hdr := file[id*pageSize:]
		flags, overflow := ne.Uint16(hdr[8:]), uint64(ne.Uint32(hdr[12:]))
		if ne.Uint64(hdr) != id || flags == 0 { // a page never written
			id++
			continue
		}
		p, err := w.page(id, int(id%3), flags)
		if err != nil {
			t.Fatalf("page %d: %v", id, err)
		}
		if want := file[id*pageSize : (id+overflow+1)*pageSize]; !bytes.Equal(p, want) {
			t.Fatalf("page %d (%d overflow pages): %d bytes read differ from the file's %d", id, overflow, len(p), len(want))
		}
		read++
		if overflow > 0 {
			overflowing++
		}
		id += overflow + 1
	}
	if overflowing < 10 || read-overflowing < 10 {
		t.Fatalf("%d pages read, %d of them overflowing: the file does not test both kinds", read, overflowing)
	}
	if err := walkFile(path, pageSize, true); err != nil {
		t.Fatalf("the whole walk: %v", err)
	}
}

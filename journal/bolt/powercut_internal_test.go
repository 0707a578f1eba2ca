package bolt

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestLogSurvivesPowerCuts: what a power cut can leave of the log is read
// as the entries that were synced, and at most the one being written —
// never an error, never an entry that was not written whole, never an
// older entry left from before a reuse of the log.
//
// A kill -9 keeps the page cache, so the kill tests never see a write that
// only partly reached the disk. Here the log is written by the journal's
// own writer (wal.write, with its growth and its reuse from the start),
// and each write is then cut: any of its 512-byte sectors may have reached
// the disk or not, and the file's new size may have been kept or not.
// The journal's file is not modelled: bbolt's commits are atomic, and the
// applied number read here is one the file could hold at that moment (the
// log is reused only once all of it is applied).
func TestLogSurvivesPowerCuts(t *testing.T) {
	const sector = 512
	rng := rand.New(rand.NewSource(7))
	w, err := openWAL(filepath.Join(t.TempDir(), "journal.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.id = []byte("journal1")

	var disk []byte       // what the disk holds once each write is synced
	vals := [][]byte{nil} // the record of each entry, by sequence number
	floor := uint64(0)    // the file has applied at least this much
	cuts, reuses := 0, 0
	for n := 1; n <= 700; n++ {
		val := make([]byte, 40+rng.Intn(20000)) // one to six blocks
		rng.Read(val)
		entry := w.entry([]*walRecord{{kind: recInv, isNew: true, new: byte(journal.StateIntent), id: journal.NewID(), run: journal.NewID(), server: "s", tool: "t", val: val}})
		if !w.fits(len(entry)) {
			floor = w.seq // the committer waits until everything is applied
			w.rewind()
			reuses++
		}
		// Cut the writes near the log's start (after a reuse), and one in
		// twenty others.
		off := int(w.off)
		cutThis := off <= 16*walAlign || rng.Intn(20) == 0
		var before []byte
		if cutThis {
			before = bytes.Clone(disk)
		}
		if _, err := w.write(entry); err != nil {
			t.Fatal(err)
		}
		vals = append(vals, val)
		disk = append(disk, make([]byte, max(0, int(w.size)-len(disk)))...)
		copy(disk[off:], entry)
		if !cutThis {
			continue
		}
		cuts++
		seq := w.seq
		for _, keepSize := range []bool{true, false} {
			cut := append(bytes.Clone(before), make([]byte, max(0, len(disk)-len(before)))...)
			for s := off; s < off+len(entry); s += sector {
				if rng.Intn(2) == 0 {
					copy(cut[s:min(s+sector, len(cut))], disk[s:])
				}
			}
			if !keepSize {
				cut = cut[:max(len(before), min(len(cut), off))]
			}
			// The entry is whole when its header and records are (not
			// necessarily its padding to the next block).
			used := walHeader + int(binary.LittleEndian.Uint32(entry[4:]))
			whole := len(cut) >= off+used && bytes.Equal(cut[off:off+used], entry[:used])
			for _, applied := range []uint64{floor, floor + uint64(rng.Int63n(int64(seq-floor))), seq - 1} {
				entries, _, err := readWAL(bytes.NewReader(cut), int64(len(cut)), applied, w.id)
				if err != nil {
					t.Fatalf("write %d cut (size kept %v), applied %d: %v", seq, keepSize, applied, err)
				}
				want := seq - 1 - applied
				if whole {
					want++
				}
				if uint64(len(entries)) != want {
					t.Fatalf("write %d cut (size kept %v, whole %v), applied %d: %d entries, want %d", seq, keepSize, whole, applied, len(entries), want)
				}
				for i, e := range entries {
					if e.seq != applied+1+uint64(i) || len(e.recs) != 1 || !bytes.Equal(e.recs[0].val, vals[e.seq]) {
						t.Fatalf("write %d cut, applied %d: entry %d is not what was written as %d", seq, applied, i, applied+1+uint64(i))
					}
				}
			}
		}
	}
	if got, err := os.ReadFile(w.path); err != nil || !bytes.Equal(got, disk) {
		t.Fatalf("the model of the disk is not the log (%v)", err)
	}
	if reuses < 2 || cuts < 40 {
		t.Fatalf("%d reuses of the log, %d cuts: the test did not reach what it is for", reuses, cuts)
	}
	t.Logf("%d writes cut, %d reuses of the log", cuts, reuses)
}

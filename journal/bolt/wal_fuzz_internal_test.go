package bolt

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpflow/mcpflow/journal"
)

// walFixture is a log as a journal wrote it and a crash left it (no entry
// applied to the file), cut after the block of its last entry, with what
// it holds.
type walFixture struct {
	log    []byte
	id     []byte            // the journal's id, which each entry carries
	offs   []int             // where each entry starts
	bodies map[uint64][]byte // the records of each entry, by sequence number
}

// writeFixtureLog has a journal (encrypted with key, when not nil) write a
// run through the write methods — outcomes riding with the next intent, a
// skipped step, an entry larger than a block — then crash, and reads its
// log. Its clock ticks a millisecond a reading, so that every process
// that fuzzes (and a rerun of an input the fuzzer saved) lays the log out
// the same: only ids, keys and nonces differ.
func writeFixtureLog(t testing.TB, key *journal.Key) walFixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	var ticks atomic.Int64
	now := func() time.Time {
		return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(ticks.Add(1)) * time.Millisecond)
	}
	j, err := Open(path, &journal.Options{Key: key, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	j.HoldApplier()
	r := &journal.Run{Workflow: "wf", Definition: []byte("name: wf\n"), Inputs: map[string]any{"n": 1.0}}
	if err := j.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	var prev *journal.Pending
	for i, size := range []int{10, 2500, 300} { // 2500: entries of two blocks
		in, err := j.Begin(&journal.Invocation{RunID: r.ID, Step: fmt.Sprint("s", i), Item: -1, Server: "srv", Tool: "t",
			Arguments: json.RawMessage(`{"data":"` + strings.Repeat("x", size) + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && !prev.Done() {
			t.Fatal("an outcome did not ride with the next intent")
		}
		if prev, err = j.FinishLater(in, journal.Outcome{State: journal.StateCompleted, Result: &journal.Result{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Skip(&journal.Invocation{RunID: r.ID, Step: "skipped", Item: -1, Server: "srv", Tool: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := j.EndRun(r.ID, journal.RunSucceeded, nil, map[string]any{"out": "x"}); err != nil {
		t.Fatal(err)
	}
	if n := j.Crash(); n < 6 {
		t.Fatalf("the log holds %d unapplied entries, want the run's 6", n)
	}
	data, err := os.ReadFile(walPath(path))
	if err != nil {
		t.Fatal(err)
	}
	fx := walFixture{bodies: map[uint64][]byte{}}
	end := 0
	for off := 0; ; {
		seq, id, p, ok := walEntryAt(data, off)
		if !ok {
			break
		}
		if seq != uint64(len(fx.offs)+1) {
			t.Fatalf("entry %d at %d has sequence number %d", len(fx.offs)+1, off, seq)
		}
		fx.id = bytes.Clone(id)
		fx.offs = append(fx.offs, off)
		fx.bodies[seq] = bytes.Clone(p)
		off = walNext(off, len(p))
		end = off
	}
	fx.log = data[:end]
	return fx
}

// recordEnds returns where each record of an entry's body ends.
func recordEnds(t testing.TB, body []byte) []int {
	recs, err := decodeRecords(body)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int
	n := 0
	for _, r := range recs {
		n += len(r.appendTo(nil))
		ends = append(ends, n)
	}
	return ends
}

// FuzzReadWAL feeds readWAL — the reader Open applies a crashed journal's
// log with, and its record decoding — logs a journal really wrote, cut at
// every record, with bytes flipped, blocks missing, moved or repeated,
// another journal's log, and bytes that are no log at all. Whatever the
// log, readWAL does not panic, and either refuses it (journal.ErrDamaged,
// ErrForeignLog: nothing is applied) or returns entries that are exactly
// entries the journal wrote, whole — each entry and each record verified
// against its checksum — in order from the one after applied. An entry
// cut short ends the log (a write that never returned) and is never
// returned in part; an intact entry after the end of what it returns is
// damage, not a silent loss. A real log cut anywhere reads as the entries
// it holds whole.
//
// An input is a log and what readWAL is told: base picks the log (the
// first journal's, the second's, the first's entries followed by the
// second's, or patch itself), blocks rebuilds it from its 4 KiB blocks in
// that order, patch is then written at off, and the log is cut at cut
// (0: not cut); whose picks the journal it is read for (the first, the
// second, or one that never had a log), applied what its file holds.
func FuzzReadWAL(f *testing.F) {
	a := writeFixtureLog(f, journal.NewKey())
	b := writeFixtureLog(f, nil)
	if bytes.Equal(a.id, b.id) {
		f.Fatal("two journals with one id")
	}
	truth := map[string]map[uint64][]byte{string(a.id): a.bodies, string(b.id): b.bodies}
	ids := [][]byte{a.id, b.id, nil}
	last := uint64(len(a.offs))
	const (
		logA, logB, logAB, logRaw = 0, 1, 2, 3
		ofA, ofB, ofNone          = 0, 1, 2
	)
	bases := [][]byte{a.log, b.log, append(bytes.Clone(a.log[:a.offs[2]]), b.log[b.offs[2]:]...)}

	type input struct {
		base          byte
		blocks, patch []byte
		off, cut      uint32
		applied       uint64
		whose         byte
	}
	add := func(in input) { f.Add(in.base, in.blocks, in.patch, in.off, in.cut, in.applied, in.whose) }
	for _, applied := range []uint64{0, 1, 3, last - 1, last, last + 1} {
		add(input{applied: applied})
	}
	// Cut at every entry and every record, and inside each header.
	for _, off := range a.offs {
		seq, _, p, _ := walEntryAt(a.log, off)
		add(input{cut: uint32(off)})
		add(input{cut: uint32(off + walHeader/2)})
		for _, end := range recordEnds(f, p) {
			add(input{cut: uint32(off + walHeader + end)})
			add(input{cut: uint32(off + walHeader + end - 1), applied: seq - 1})
		}
	}
	// A byte flipped in each part of each entry: magic, length, sequence
	// number, journal id, checksum, records, padding.
	for _, off := range a.offs {
		_, _, p, _ := walEntryAt(a.log, off)
		for _, at := range []int{0, 5, 8, 16, 24, walHeader, walHeader + len(p)/2, walHeader + len(p) - 1, walHeader + len(p)} {
			if off+at < len(a.log) {
				flip := []byte{a.log[off+at] ^ 0x20}
				add(input{patch: flip, off: uint32(off + at)})
				add(input{patch: flip, off: uint32(off + at), applied: 2})
			}
		}
	}
	// Blocks moved: an entry missing, two swapped, one twice, older
	// entries after newer ones (as after a reuse of the log), half an
	// entry, an entry zeroed. Entries 1 to 6 are in blocks 0, 1, 2–3, 4–5,
	// 6 and 7.
	for _, blocks := range [][]byte{{0, 2, 3, 4, 5}, {0, 4, 5, 2, 3}, {0, 1, 1, 2, 3}, {4, 5, 6, 2, 3}, {4, 5, 6, 0, 7}, {0, 1, 2, 6, 7}} {
		for _, applied := range []uint64{0, 2, 3} {
			add(input{blocks: blocks, applied: applied})
		}
	}
	for _, applied := range []uint64{1, 2} {
		add(input{blocks: []byte{0, 1, 2, 3}, patch: make([]byte, walAlign), off: walAlign, applied: applied})
	}
	// Another journal's log, two journals' entries, no journal's.
	add(input{base: logB, whose: ofB})
	add(input{base: logB, whose: ofA})
	add(input{base: logA, whose: ofNone})
	add(input{base: logAB, whose: ofA})
	add(input{base: logAB, whose: ofB})
	// Not logs at all.
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 31, 32, walAlign, 3*walAlign + 17} {
		junk := make([]byte, n)
		rng.Read(junk)
		add(input{base: logRaw, patch: junk})
	}
	add(input{base: logRaw, patch: make([]byte, walAlign)})
	add(input{base: logRaw, patch: []byte("name: wf\nsteps: []\n")})
	long := bytes.Clone(a.log[:walHeader]) // a header whose length runs past the end
	binary.LittleEndian.PutUint32(long[4:], 1<<31)
	add(input{base: logRaw, patch: long})

	f.Fuzz(func(t *testing.T, base byte, blocks, patch []byte, off, cut uint32, applied uint64, whose byte) {
		var log []byte
		if i := int(base) % (len(bases) + 1); i < len(bases) {
			log = bytes.Clone(bases[i])
			if n := len(log) / walAlign; len(blocks) > 0 && n > 0 {
				var moved []byte
				for _, k := range blocks[:min(len(blocks), 4*n)] {
					at := int(k) % n * walAlign
					moved = append(moved, log[at:at+walAlign]...)
				}
				log = moved
			}
			if len(log) > 0 {
				copy(log[int(off)%len(log):], patch)
			}
		} else {
			log = bytes.Clone(patch)
		}
		if cut > 0 {
			log = log[:int(cut)%(len(log)+1)]
		}
		id := ids[int(whose)%len(ids)]
		applied %= last + 3
		entries, highest, err := readWAL(bytes.NewReader(log), int64(len(log)), applied, id)
		if err != nil {
			if entries != nil || highest != 0 || !(errors.Is(err, journal.ErrDamaged) || errors.Is(err, journal.ErrForeignLog)) {
				t.Fatalf("error %v with %d entries, highest %d: want journal.ErrDamaged or journal.ErrForeignLog, and nothing to apply", err, len(entries), highest)
			}
			return
		}
		end := applied // the last entry read
		for i, e := range entries {
			if e.seq != applied+1+uint64(i) {
				t.Fatalf("entry %d has sequence number %d after applied %d: entries follow it without a gap", i, e.seq, applied)
			}
			body, ok := truth[string(id)][e.seq]
			if !ok {
				t.Fatalf("entry %d was never written by this journal", e.seq)
			}
			want, err := decodeRecords(body)
			if err != nil {
				t.Fatal(err)
			}
			if len(e.recs) != len(want) {
				t.Fatalf("entry %d has %d records, the journal wrote %d", e.seq, len(e.recs), len(want))
			}
			for k, r := range e.recs {
				if !bytes.Equal(r.appendTo(nil), want[k].appendTo(nil)) {
					t.Fatalf("entry %d, record %d is not what the journal wrote", e.seq, k)
				}
				verifyRecord(t, r)
			}
			if e.size != walNext(0, len(body)) {
				t.Fatalf("entry %d: size %d, want %d", e.seq, e.size, walNext(0, len(body)))
			}
			end = e.seq
		}
		if len(entries) > 0 && highest < end {
			t.Fatalf("highest %d is below entry %d, which was read", highest, end)
		}
		if highest > end {
			t.Fatalf("entry %d is intact in the log but was neither read nor reported as damage (read up to %d, applied %d)", highest, end, applied)
		}
		// A real log cut anywhere: its whole entries after applied, and
		// not the one cut short.
		if bytes.Equal(id, a.id) && bytes.HasPrefix(a.log, log) {
			var want uint64
			for i, off := range a.offs {
				if seq := uint64(i + 1); seq > applied && off+walHeader+len(a.bodies[seq]) <= len(log) {
					want++
				}
			}
			if uint64(len(entries)) != want {
				t.Fatalf("a log cut at %d read as %d entries after %d, want the %d it holds whole", len(log), len(entries), applied, want)
			}
		}
	})
}

// verifyRecord fails t unless r is a record the journal stores: its
// checksum holds and it decodes as a run or an invocation with r's ids.
func verifyRecord(t *testing.T, r *walRecord) {
	t.Helper()
	switch r.kind {
	case recRun:
		run, err := journal.DecodeRun(nil, r.val)
		if err != nil || run.ID != r.id || run.Status != journal.RunStatus(r.new) {
			t.Fatalf("run record %s: %v", r.id, err)
		}
	case recInv:
		inv, err := journal.DecodeInvocation(nil, r.val)
		if err != nil || inv.ID != r.id || inv.RunID != r.run || inv.State != journal.State(r.new) || inv.Server != r.server || inv.Tool != r.tool {
			t.Fatalf("invocation record %s: %v", r.id, err)
		}
	default:
		t.Fatalf("record of kind %d", r.kind)
	}
}

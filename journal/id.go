package journal

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ID identifies a run or an invocation: a UUIDv7, so that byte order is
// creation-time order.
type ID uuid.UUID

// NewID returns a fresh time-ordered id.
func NewID() ID { return defaultIDs.Next(time.Now()) }

var defaultIDs IDGen

// IDGen makes UUIDv7s that strictly increase: the first 64 bits are the
// millisecond timestamp, the version and a 12-bit sub-millisecond sequence
// (RFC 9562, method 3), bumped when the clock stands still or goes back.
// Each Journal has its own, driven by its clock.
type IDGen struct {
	mu   sync.Mutex
	last int64 // ms<<12 | seq
}

func (g *IDGen) Next(now time.Time) ID {
	ms := max(now.UnixMilli(), 0)
	t := ms<<12 | (now.UnixNano()-ms*1e6)>>8&0xfff
	g.mu.Lock()
	if t <= g.last {
		t = g.last + 1
	}
	g.last = t
	g.mu.Unlock()
	var id ID
	_, _ = rand.Read(id[8:]) // never fails (crypto/rand)
	binary.BigEndian.PutUint64(id[:8], uint64(t>>12)<<16|0x7000|uint64(t&0xfff))
	id[8] = id[8]&0x3f | 0x80 // variant 10
	return id
}

// ParseID parses a full id.
func ParseID(s string) (ID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return ID{}, fmt.Errorf("invalid id %q: %w", s, err)
	}
	return ID(u), nil
}

func (id ID) String() string { return uuid.UUID(id).String() }

// Short is the first 18 characters: the millisecond timestamp and the
// sub-millisecond sequence, which are unique among the ids one process
// makes. It is accepted wherever an id is typed, as long as it is unique.
func (id ID) Short() string { return id.String()[:18] }

// Time is the creation time written in the id (millisecond precision).
func (id ID) Time() time.Time { return time.UnixMilli(id.Millis()) }

func (id ID) Millis() int64 { return int64(binary.BigEndian.Uint64(id[:8]) >> 16) }

// IsZero reports whether the id is unset.
func (id ID) IsZero() bool { return id == ID{} }

func (id ID) Bytes() []byte { b := id; return b[:] }

func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	*id = v
	return err
}

// MillisKey is the smallest key of an id made at or after ms.
func MillisKey(ms int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(max(ms, 0))<<16)[:6]
}

// PrefixBytes turns a typed id prefix into the bytes it fixes and whether a
// final half byte remains. Dashes are ignored.
func PrefixBytes(prefix string) (whole []byte, half byte, hasHalf bool, err error) {
	p := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	if p == "" {
		return nil, 0, false, fmt.Errorf("empty id")
	}
	if len(p) > 32 {
		return nil, 0, false, fmt.Errorf("invalid id %q: too long", prefix)
	}
	if len(p)%2 == 1 {
		hasHalf = true
		v, err := hex.DecodeString(p[len(p)-1:] + "0")
		if err != nil {
			return nil, 0, false, fmt.Errorf("invalid id %q: not hexadecimal", prefix)
		}
		half = v[0]
		p = p[:len(p)-1]
	}
	whole, err = hex.DecodeString(p)
	if err != nil {
		return nil, 0, false, fmt.Errorf("invalid id %q: not hexadecimal", prefix)
	}
	return whole, half, hasHalf, nil
}

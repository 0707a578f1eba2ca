package journal

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// ID identifies a run or an invocation: a UUIDv7, so that byte order is
// creation-time order.
type ID uuid.UUID

// NewID returns a fresh time-ordered id.
func NewID() ID {
	u, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source fails.
		u = uuid.New()
	}
	return ID(u)
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

// Short is the first 13 characters (the millisecond timestamp and a few
// more digits): enough to tell ids apart in a listing and accepted wherever
// an id is typed, as long as it is unique.
func (id ID) Short() string { return id.String()[:13] }

// IsZero reports whether the id is unset.
func (id ID) IsZero() bool { return id == ID{} }

func (id ID) key() []byte { b := id; return b[:] }

func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

func (id *ID) UnmarshalText(b []byte) error {
	v, err := ParseID(string(b))
	*id = v
	return err
}

// prefixBytes turns a typed id prefix into the bytes it fixes and whether a
// final half byte remains. Dashes are ignored.
func prefixBytes(prefix string) (whole []byte, half byte, hasHalf bool, err error) {
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

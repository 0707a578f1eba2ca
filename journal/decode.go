package journal

import (
	"encoding/json"
	"fmt"
)

// DecodeRun decodes a stored run record, its payload opened when s can.
func DecodeRun(s *Sealer, v []byte) (*Run, error) {
	b, err := StripChecksum("run record", v)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("run record: %w: %v", ErrDamaged, err)
	}
	if r.ID.IsZero() || r.Status == runInvalid {
		return nil, fmt.Errorf("run record: %w: id or status missing", ErrDamaged)
	}
	if err := openRun(s, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DecodeInvocation decodes a stored invocation record, its payload opened when s
// can.
func DecodeInvocation(s *Sealer, v []byte) (*Invocation, error) {
	b, err := StripChecksum("invocation record", v)
	if err != nil {
		return nil, err
	}
	inv, err := ParseInvocation(b)
	if err != nil {
		return nil, err
	}
	if err := openInv(s, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

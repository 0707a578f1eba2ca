package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// MaxCandidates is how many of the ids an ambiguous prefix matches are
// named.
const MaxCandidates = 5

// Ambiguous is the ErrAmbiguous of a prefix that matches the ids found
// (up to maxCandidates+1, in order): it names them, as git does.
func Ambiguous(what, prefix string, found []ID) error {
	var names []string
	for i, id := range found {
		if i == MaxCandidates {
			names = append(names, "…")
			break
		}
		names = append(names, id.String())
	}
	return fmt.Errorf("%s %q matches several: %w: %s; type more of the id", what, prefix, ErrAmbiguous, strings.Join(names, ", "))
}

// Filter selects invocations. Zero fields match everything; set fields
// must all match.
type Filter struct {
	Run    ID
	State  State
	Server string
	Tool   string
	Since  time.Time // created at or after
	Until  time.Time // created before
	// Before is a cursor: only invocations older than this id (newest-first
	// listing) are returned. Use the last id of a page to get the next.
	Before ID
	// Limit caps the number returned; 0 means no limit.
	Limit int
	// ToolError keeps only invocations that completed with a tool error.
	ToolError bool
}

func (f *Filter) Match(inv *Invocation) bool {
	return (f.Run.IsZero() || inv.RunID == f.Run) && (!f.ToolError || inv.ToolError) &&
		(f.State == stateInvalid || inv.State == f.State) &&
		(f.Server == "" || inv.Server == f.Server) &&
		(f.Tool == "" || inv.Tool == f.Tool) &&
		(f.Since.IsZero() || !inv.CreatedAt.Before(f.Since)) &&
		(f.Until.IsZero() || inv.CreatedAt.Before(f.Until))
}

// RunFilter selects runs. Zero fields match everything.
type RunFilter struct {
	Status RunStatus
	// Workflow keeps runs of the workflow of this name.
	Workflow string
	// Since keeps runs started at or after it.
	Since time.Time
	// Before is a cursor: only runs older than this id are returned.
	Before ID
	Limit  int
}

// WriteLines writes the lines an export read in one transaction, once it
// is over: a slow reader never holds a transaction open.
func WriteLines(w io.Writer, lines [][]byte) error {
	for _, line := range lines {
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// ExportLine is one invocation record's JSON (unsealed) as a line of
// Export: checked, its item written null, its payload decrypted when asked.
func ExportLine(s *Sealer, what string, v []byte, decrypt bool) ([]byte, error) {
	if !json.Valid(v) {
		return nil, fmt.Errorf("%s: %w: not JSON", what, ErrDamaged)
	}
	if decrypt {
		inv, err := ParseInvocation(v)
		if err == nil {
			err = openInv(s, inv)
		}
		if err != nil {
			return nil, err
		}
		if v, err = json.Marshal(inv); err != nil {
			return nil, err
		}
	}
	return append(exportItem(v), '\n'), nil
}

// exportItem is a copy of a record's JSON with a plain step's item, stored
// as -1, written null, as every other JSON output of mcpflow has it. The
// first `,"item":` is the field: only id, run_id and step come before it,
// and a quote inside a JSON string is always escaped.
func exportItem(v []byte) []byte {
	field := []byte(`,"item":`)
	i := bytes.Index(v, field)
	if i < 0 || !bytes.HasPrefix(v[i+len(field):], []byte("-1,")) {
		return bytes.Clone(v)
	}
	out := make([]byte, 0, len(v)+2)
	out = append(out, v[:i+len(field)]...)
	out = append(out, "null"...)
	return append(out, v[i+len(field)+2:]...)
}

// ParseInvocation decodes one invocation record's JSON (one line of
// Export; an item of null is a plain step's). A record that is not valid
// gives an error wrapping ErrDamaged.
func ParseInvocation(b []byte) (*Invocation, error) {
	inv := Invocation{Item: -1}
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("invocation record: %w: %v", ErrDamaged, err)
	}
	if inv.ID.IsZero() || inv.RunID.IsZero() || inv.State == stateInvalid {
		return nil, fmt.Errorf("invocation record: %w: id, run id or state missing", ErrDamaged)
	}
	for _, r := range inv.Resolutions {
		if r.As == stateInvalid || r.From == stateInvalid {
			return nil, fmt.Errorf("invocation record %s: %w: resolution without states", inv.ID, ErrDamaged)
		}
	}
	return &inv, nil
}

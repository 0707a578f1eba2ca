package journal

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// marshalInv is json.Marshal(inv), byte for byte, written field by field:
// every step writes its invocation twice (intent, then outcome), and
// encoding/json's reflection made that the largest cost of a commit after
// the fsync. Anything out of the ordinary — a string that needs escaping,
// a time not in UTC or outside years 0–9999, a payload that is not valid
// JSON — is left to encoding/json for the whole record, so the output and
// the errors are always encoding/json's (TestMarshalInvIsJSONMarshal).
func marshalInv(inv *Invocation) ([]byte, error) {
	e := recordEncoder{b: make([]byte, 0, invSize(inv))}
	e.inv(inv)
	if e.slow {
		return json.Marshal(inv)
	}
	return e.b, nil
}

// invSize is a little more than the size of inv's record, and of the
// checksum that seal appends to it: one allocation holds both.
func invSize(inv *Invocation) int {
	n := 512 + len(inv.Step) + len(inv.Server) + len(inv.Tool) + len(inv.Method) + rawSize(inv.Arguments) + len(inv.ArgumentsDigest) +
		rawSize(inv.Annotations) + len(inv.Trust.WorkspaceSource) + len(inv.IdempotencyKey) + len(inv.Sealed)
	for _, a := range inv.Attempts {
		n += 192 + len(a.Kind) + len(a.Failure) + len(a.Detail) + rawSize(a.Annotations)
		if a.Trust != nil {
			n += len(a.Trust.WorkspaceSource)
		}
	}
	if r := inv.Result; r != nil {
		n += 64 + rawSize(r.Content) + rawSize(r.StructuredContent)
	}
	if e := inv.Error; e != nil {
		n += 48 + len(e.Code) + len(e.Message)
	}
	for _, d := range inv.Decisions {
		n += 128 + len(d.Verdict) + len(d.Reason) + len(d.View)
	}
	for _, r := range inv.Resolutions {
		n += 160 + len(r.By) + len(r.Why)
	}
	return n
}

// rawSize is the most that raw may write for m: each <, > and & becomes
// six bytes, U+2028 and U+2029 (three) six.
func rawSize(m json.RawMessage) int {
	n := len(m)
	for _, c := range m {
		switch c {
		case '<', '>', '&':
			n += 5
		case 0xE2:
			n += 3
		}
	}
	return n
}

// recordEncoder appends a record's JSON to b. slow is set at the first
// value it leaves to encoding/json; what b holds is then garbage.
type recordEncoder struct {
	b    []byte
	slow bool
}

func (e *recordEncoder) inv(inv *Invocation) {
	e.lit(`{"id":`)
	e.id(inv.ID)
	e.lit(`,"run_id":`)
	e.id(inv.RunID)
	e.lit(`,"step":`)
	e.str(inv.Step)
	e.lit(`,"item":`)
	e.b = strconv.AppendInt(e.b, int64(inv.Item), 10)
	e.lit(`,"server":`)
	e.str(inv.Server)
	e.lit(`,"tool":`)
	e.str(inv.Tool)
	if inv.Method != "" {
		e.lit(`,"method":`)
		e.str(string(inv.Method))
	}
	if len(inv.Arguments) > 0 {
		e.lit(`,"arguments":`)
		e.raw(inv.Arguments)
	}
	if inv.ArgumentsDigest != "" {
		e.lit(`,"arguments_digest":`)
		e.str(inv.ArgumentsDigest)
	}
	if len(inv.Annotations) > 0 {
		e.lit(`,"annotations":`)
		e.raw(inv.Annotations)
	}
	e.lit(`,"trust":`)
	e.trust(&inv.Trust)
	e.lit(`,"idempotency_key":`)
	e.str(inv.IdempotencyKey)
	e.lit(`,"state":`)
	e.str(inv.State.String())
	e.lit(`,"attempts":`)
	if inv.Attempts == nil {
		e.lit(`null`)
	} else {
		e.lit(`[`)
		for i := range inv.Attempts {
			if i > 0 {
				e.lit(`,`)
			}
			e.attempt(&inv.Attempts[i])
		}
		e.lit(`]`)
	}
	if r := inv.Result; r != nil {
		e.lit(`,"result":{`)
		if len(r.Content) > 0 {
			e.lit(`"content":`)
			e.raw(r.Content)
			e.lit(`,`)
		}
		if len(r.StructuredContent) > 0 {
			e.lit(`"structured_content":`)
			e.raw(r.StructuredContent)
			e.lit(`,`)
		}
		e.lit(`"is_error":`)
		e.b = strconv.AppendBool(e.b, r.IsError)
		e.lit(`}`)
	}
	if len(inv.Inputs) > 0 {
		// Rare (a call that asked for input): encoding/json writes it.
		e.slow = true
		return
	}
	if inv.Sealed != "" {
		e.lit(`,"sealed":`)
		e.str(inv.Sealed)
	}
	if inv.ToolError {
		e.lit(`,"tool_error":true`)
	}
	if inv.Error != nil {
		e.lit(`,"error":{"code":`)
		e.str(inv.Error.Code)
		e.lit(`,"message":`)
		e.str(inv.Error.Message)
		e.lit(`}`)
	}
	if len(inv.Decisions) > 0 {
		e.lit(`,"decisions":[`)
		for i, d := range inv.Decisions {
			if i > 0 {
				e.lit(`,`)
			}
			e.lit(`{"attempt":`)
			e.b = strconv.AppendInt(e.b, int64(d.Attempt), 10)
			e.lit(`,"at":`)
			e.time(d.At)
			e.lit(`,"verdict":`)
			e.str(string(d.Verdict))
			e.lit(`,"reason":`)
			e.str(d.Reason)
			e.lit(`,"view":`)
			e.str(string(d.View))
			e.lit(`}`)
		}
		e.lit(`]`)
	}
	if len(inv.Resolutions) > 0 {
		e.lit(`,"resolutions":[`)
		for i, r := range inv.Resolutions {
			if i > 0 {
				e.lit(`,`)
			}
			e.lit(`{"by":`)
			e.str(r.By)
			e.lit(`,"at":`)
			e.time(r.At)
			e.lit(`,"as":`)
			e.str(r.As.String())
			e.lit(`,"why":`)
			e.str(r.Why)
			e.lit(`,"from":`)
			e.str(r.From.String())
			e.lit(`}`)
		}
		e.lit(`]`)
	}
	e.lit(`,"created_at":`)
	e.time(inv.CreatedAt)
	e.lit(`,"updated_at":`)
	e.time(inv.UpdatedAt)
	e.lit(`}`)
}

func (e *recordEncoder) attempt(a *Attempt) {
	e.lit(`{"n":`)
	e.b = strconv.AppendInt(e.b, int64(a.N), 10)
	e.lit(`,"sent_at":`)
	e.time(a.SentAt)
	if a.Kind != "" {
		e.lit(`,"kind":`)
		e.str(string(a.Kind))
	}
	if a.Replay {
		e.lit(`,"replay":true`)
	}
	if a.EndedAt != nil {
		e.lit(`,"ended_at":`)
		e.time(*a.EndedAt)
	}
	if a.Failure != "" {
		e.lit(`,"failure":`)
		e.str(string(a.Failure))
	}
	if a.Detail != "" {
		e.lit(`,"detail":`)
		e.str(a.Detail)
	}
	if a.Interrupted {
		e.lit(`,"interrupted":true`)
	}
	if a.Trust != nil {
		e.lit(`,"trust":`)
		e.trust(a.Trust)
	}
	if len(a.Annotations) > 0 {
		e.lit(`,"annotations":`)
		e.raw(a.Annotations)
	}
	e.lit(`}`)
}

func (e *recordEncoder) trust(t *Trust) {
	e.lit(`{"server":`)
	e.b = strconv.AppendBool(e.b, t.Server)
	e.lit(`,"workspace":`)
	e.b = strconv.AppendBool(e.b, t.Workspace)
	if t.WorkspaceSource != "" {
		e.lit(`,"workspace_source":`)
		e.str(t.WorkspaceSource)
	}
	e.lit(`}`)
}

func (e *recordEncoder) lit(s string) { e.b = append(e.b, s...) }

// id appends id as its MarshalText does, quoted: the UUID form.
func (e *recordEncoder) id(id ID) {
	var s [38]byte
	s[0], s[37] = '"', '"'
	hex.Encode(s[1:9], id[0:4])
	s[9] = '-'
	hex.Encode(s[10:14], id[4:6])
	s[14] = '-'
	hex.Encode(s[15:19], id[6:8])
	s[19] = '-'
	hex.Encode(s[20:24], id[8:10])
	s[24] = '-'
	hex.Encode(s[25:37], id[10:16])
	e.b = append(e.b, s[:]...)
}

// str appends s quoted when no character of it needs an escape (printable
// ASCII other than the quote, the backslash and encoding/json's HTML
// characters); any other string is left to encoding/json.
func (e *recordEncoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			e.slow = true
			return
		}
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
}

// time appends t as its MarshalJSON does, for UTC times of years 0–9999.
func (e *recordEncoder) time(t time.Time) {
	if t.Location() != time.UTC || t.Year() < 0 || t.Year() > 9999 {
		e.slow = true
		return
	}
	e.b = append(e.b, '"')
	e.b = t.AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, '"')
}

// raw appends a JSON payload as encoding/json does a json.RawMessage:
// compacted, with <, >, &, U+2028 and U+2029 escaped in its strings. It
// validates first (no allocation); invalid JSON is left to encoding/json,
// which reports it.
func (e *recordEncoder) raw(m json.RawMessage) {
	if !json.Valid(m) {
		e.slow = true
		return
	}
	const digits = "0123456789abcdef"
	inString, escaped := false, false
	for i := 0; i < len(m); i++ {
		c := m[i]
		switch {
		case escaped: // the character after a backslash, in a string
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString && (c == '<' || c == '>' || c == '&'):
			e.b = append(e.b, '\\', 'u', '0', '0', digits[c>>4], digits[c&0xF])
			continue
		case inString && c == 0xE2 && i+2 < len(m) && m[i+1] == 0x80 && m[i+2]&^1 == 0xA8:
			e.b = append(e.b, '\\', 'u', '2', '0', '2', digits[m[i+2]&0xF])
			i += 2
			continue
		case inString:
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '"':
			inString = true
		}
		e.b = append(e.b, c)
	}
}

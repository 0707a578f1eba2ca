package journal

import (
	"bytes"
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
	e := recordEncoder{b: make([]byte, 0, 512)}
	e.inv(inv)
	if e.slow {
		return json.Marshal(inv)
	}
	return e.b, nil
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
	if a.Replay {
		e.lit(`,"replay":true`)
	}
	if a.EndedAt != nil {
		e.lit(`,"ended_at":`)
		e.time(*a.EndedAt)
	}
	if a.Failure != "" {
		e.lit(`,"failure":`)
		e.str(a.Failure)
	}
	if a.Detail != "" {
		e.lit(`,"detail":`)
		e.str(a.Detail)
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
// compacted, with <, >, &, U+2028 and U+2029 escaped. Invalid JSON is
// left to encoding/json, which reports it.
func (e *recordEncoder) raw(m json.RawMessage) {
	start := len(e.b)
	buf := bytes.NewBuffer(e.b)
	if err := json.Compact(buf, m); err != nil {
		e.slow = true
		return
	}
	e.b = buf.Bytes()
	if htmlSensitive(e.b[start:]) {
		esc := bytes.NewBuffer(make([]byte, 0, len(e.b)-start+16))
		json.HTMLEscape(esc, e.b[start:])
		e.b = append(e.b[:start], esc.Bytes()...)
	}
}

// htmlSensitive reports whether b holds a byte that json.HTMLEscape may
// rewrite: <, >, & or the first byte of U+2028 and U+2029.
func htmlSensitive(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

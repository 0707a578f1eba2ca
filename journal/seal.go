package journal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpflow/mcpflow/internal/atomicfile"
)

// Key encrypts the payloads of a journal's records — a run's inputs and
// outputs, an invocation's arguments and result — with AES-256-GCM, as
// Temporal's payload codecs do: ids, names, states, timings and digests
// stay clear for queries, what a call carried does not. The key is kept
// outside the journal (LoadKey); a journal records only the key's id.
type Key struct{ b [32]byte }

// KeyEnv names the environment variable that holds a journal key (base64
// of 32 bytes); it wins over the key file.
const KeyEnv = "MCPFLOW_JOURNAL_KEY"

// KeyFile is the name of the key file in the user's config directory.
const KeyFile = "journal.key"

var (
	// ErrKeyRequired: the journal's payloads are encrypted and no key was
	// given; it can be read (ids, states, timings) but not written.
	ErrKeyRequired = errors.New("journal is encrypted and no key was given")
	// ErrWrongKey: the key given is not the one the journal was written
	// with.
	ErrWrongKey = errors.New("journal was encrypted with another key")
)

// ParseKey reads a key written as base64 (standard or URL alphabet, padded
// or not) of 32 bytes.
func ParseKey(s string) (*Key, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == 32 {
			k := &Key{}
			copy(k.b[:], b)
			return k, nil
		}
	}
	return nil, errors.New("a journal key is 32 bytes written in base64 (44 characters)")
}

// NewKey returns a random key.
func NewKey() *Key {
	k := &Key{}
	rand.Read(k.b[:])
	return k
}

// String never shows the key.
func (k *Key) String() string { return "journal key " + k.ID() }

// Encode writes the key as base64, for a key file or KeyEnv.
func (k *Key) Encode() string { return base64.StdEncoding.EncodeToString(k.b[:]) }

// ID names the key without revealing it: the start of a hash of it.
func (k *Key) ID() string {
	h := sha256.Sum256(append([]byte("mcpflow journal key id\x00"), k.b[:]...))
	return hex.EncodeToString(h[:8])
}

// LoadKey returns the journal key: KeyEnv when set, else the key file in
// dir (the user's config directory, never a workspace). When neither exists
// and create is set, a new key is written to the file (mode 0600, its
// directory 0700); otherwise LoadKey returns nil, nil.
func LoadKey(dir string, create bool) (*Key, error) {
	if v, ok := os.LookupEnv(KeyEnv); ok && v != "" {
		k, err := ParseKey(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyEnv, err)
		}
		return k, nil
	}
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("journal key: %w", err)
		}
		k := NewKey()
		if cerr := atomicfile.Create(path, 0o600, func(f *os.File) error {
			_, err := f.WriteString(k.Encode() + "\n")
			return err
		}); cerr != nil {
			return nil, fmt.Errorf("journal key %s: %w", path, cerr)
		}
		b, err = os.ReadFile(path) // another process may have created it first
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal key: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("journal key %s: mode %v lets others read it (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return nil, fmt.Errorf("journal key %s: %w", path, err)
	}
	return k, nil
}

// Sealer encrypts and decrypts record payloads under one key.
type Sealer struct {
	aead  cipher.AEAD
	mac   []byte // the key that digests arguments
	KeyID string
}

func NewSealer(k *Key) *Sealer {
	if k == nil {
		return nil
	}
	block, _ := aes.NewCipher(k.b[:])
	aead, _ := cipher.NewGCM(block)
	mac := hmac.New(sha256.New, k.b[:])
	mac.Write([]byte("mcpflow arguments digest"))
	return &Sealer{aead: aead, mac: mac.Sum(nil), KeyID: k.ID()}
}

// seal encrypts a payload, bound to the record's key (id).
func (s *Sealer) seal(payload, id []byte) string {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, payload, id))
}

// open decrypts a sealed payload of the record id.
func (s *Sealer) open(sealed string, id []byte) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.aead.NonceSize() {
		return nil, fmt.Errorf("%w: sealed payload unreadable", ErrDamaged)
	}
	n := s.aead.NonceSize()
	p, err := s.aead.Open(nil, b[:n], b[n:], id)
	if err != nil {
		return nil, fmt.Errorf("%w: sealed payload does not decrypt with this key", ErrDamaged)
	}
	return p, nil
}

// runPayload and invPayload are the parts of records a key protects.
type runPayload struct {
	Inputs  map[string]any `json:"inputs,omitempty"`
	Outputs map[string]any `json:"outputs,omitempty"`
}

type invPayload struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    *Result         `json:"result,omitempty"`
	Inputs    []Input         `json:"inputs,omitempty"`
}

// EncodeRun is the JSON of a run as stored: with a sealer, its payload
// sealed.
func EncodeRun(s *Sealer, r *Run) ([]byte, error) {
	if s != nil && (r.Inputs != nil || r.Outputs != nil) {
		p, err := json.Marshal(runPayload{r.Inputs, r.Outputs})
		if err != nil {
			return nil, err
		}
		c := *r
		c.Inputs, c.Outputs, c.Sealed = nil, nil, s.seal(p, r.ID.Bytes())
		r = &c
	}
	return json.Marshal(r)
}

// openRun fills a decoded run's payload from its sealed form, when a
// sealer can; without one the payload stays sealed.
func openRun(s *Sealer, r *Run) error {
	if s == nil || r.Sealed == "" {
		return nil
	}
	b, err := s.open(r.Sealed, r.ID.Bytes())
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	var p runPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("run %s: %w: sealed payload: %v", r.ID, ErrDamaged, err)
	}
	r.Inputs, r.Outputs, r.Sealed = p.Inputs, p.Outputs, ""
	return nil
}

func EncodeInvocation(s *Sealer, inv *Invocation) ([]byte, error) {
	if s != nil && (inv.Arguments != nil || inv.Result != nil || inv.Inputs != nil) {
		p, err := json.Marshal(invPayload{inv.Arguments, inv.Result, inv.Inputs})
		if err != nil {
			return nil, err
		}
		c := *inv
		c.Arguments, c.Result, c.Inputs, c.Sealed = nil, nil, nil, s.seal(p, inv.ID.Bytes())
		inv = &c
	}
	return marshalInv(inv)
}

func openInv(s *Sealer, inv *Invocation) error {
	if s == nil || inv.Sealed == "" {
		return nil
	}
	b, err := s.open(inv.Sealed, inv.ID.Bytes())
	if err != nil {
		return fmt.Errorf("invocation %s: %w", inv.ID, err)
	}
	var p invPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("invocation %s: %w: sealed payload: %v", inv.ID, ErrDamaged, err)
	}
	inv.Arguments, inv.Result, inv.Inputs, inv.Sealed = p.Arguments, p.Result, p.Inputs, ""
	return nil
}

// Sealed reports whether the journal encrypts payloads (it was opened with
// a key): what the caller stores is then kept faithfully, unreadable
// without the key.
func (w *Writer) Sealed() bool { return w.sealer != nil }

// Digest is the digest of arguments as the journal records it: with a key,
// an HMAC under a key derived from it ("hmac-sha256:…"), so that a digest
// reveals nothing of secret arguments; without one, [Digest].
func (w *Writer) Digest(b []byte) string {
	if w.sealer == nil {
		return Digest(b)
	}
	m := hmac.New(sha256.New, w.sealer.mac)
	m.Write(b)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Signed records: every record a node acts on (a run dispatch, a kill
// request, a proc key marked killed, a system-info request) and every job
// placement is written as a SignedRecord: the record's JSON (body), the raft
// term of the trigger leader it was written under, and an HMAC-SHA256 over
// the record's etcd key, that term and the body, with the cluster key. A
// node acts only on a record whose MAC verifies with one of its keys (see
// Keyring.Open) and whose term fits the leader key (node/trust).

// SignedRecordVersion is the only envelope version.
const SignedRecordVersion = 1

// clusterKeyLabel separates the cluster key from any other use of the token.
const clusterKeyLabel = "cronix cluster key v1"

// macLabel is the first bytes of every MAC's input.
const macLabel = "cronix signed record v1\x00"

// Errors of Keyring.Open. A refused record is one of them (wrapped).
var (
	// ErrUnsigned: the value is not a signed record (plain JSON, garbage).
	ErrUnsigned = errors.New("record is not signed")
	// ErrBadSignature: the MAC matches no key for this etcd key and term
	// (forged, signed with another key, or copied from another key).
	ErrBadSignature = errors.New("record signature does not verify")
)

// SignedRecord is the etcd value of a signed record:
// {"v":1,"term":<term>,"mac":"<base64url>","body":<record JSON>}.
type SignedRecord struct {
	V    int             `json:"v"`
	Term uint64          `json:"term"`
	MAC  string          `json:"mac"`
	Body json.RawMessage `json:"body"`
}

// DeriveClusterKey derives the cluster key from the node token:
// HMAC-SHA256(token, "cronix cluster key v1"). Servers and nodes that share
// the node token share the key; the token itself never signs anything.
func DeriveClusterKey(nodeToken string) []byte {
	m := hmac.New(sha256.New, []byte(nodeToken))
	m.Write([]byte(clusterKeyLabel))
	return m.Sum(nil)
}

// Keyring holds the cluster key that signs records and the keys a record
// may verify with: the current one and, during a rotation, the previous.
type Keyring struct {
	keys [][]byte // keys[0] signs; all verify
}

// NewKeyring returns a keyring signing with current and verifying with
// current or any of previous (empty ones are skipped).
func NewKeyring(current []byte, previous ...[]byte) (*Keyring, error) {
	if len(current) == 0 {
		return nil, errors.New("cluster: the cluster key is empty")
	}
	k := &Keyring{keys: [][]byte{current}}
	for _, p := range previous {
		if len(p) > 0 && !bytes.Equal(p, current) {
			k.keys = append(k.keys, p)
		}
	}
	return k, nil
}

// KeyringFromTokens is NewKeyring over the keys derived from the node token
// and the previous node tokens (empty ones are skipped).
func KeyringFromTokens(token string, previous ...string) (*Keyring, error) {
	if token == "" {
		return nil, errors.New("cluster: the node token is empty")
	}
	var prev [][]byte
	for _, p := range previous {
		if p != "" {
			prev = append(prev, DeriveClusterKey(p))
		}
	}
	return NewKeyring(DeriveClusterKey(token), prev...)
}

func mac(key []byte, etcdKey string, term uint64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	m.Write([]byte(macLabel))
	binary.BigEndian.PutUint64(n[:], uint64(len(etcdKey)))
	m.Write(n[:])
	m.Write([]byte(etcdKey))
	binary.BigEndian.PutUint64(n[:], term)
	m.Write(n[:])
	m.Write(body)
	return m.Sum(nil)
}

// Seal returns the etcd value of body (one JSON value) signed for etcdKey
// under the leader term. The body's bytes are kept as they are, so the MAC
// covers exactly what is stored.
func (k *Keyring) Seal(etcdKey string, term uint64, body []byte) ([]byte, error) {
	if !json.Valid(body) {
		return nil, fmt.Errorf("cluster: seal %s: body is not JSON", etcdKey)
	}
	sum := base64.RawURLEncoding.EncodeToString(mac(k.keys[0], etcdKey, term, body))
	out := make([]byte, 0, len(body)+len(sum)+64)
	out = append(out, `{"v":`...)
	out = strconv.AppendInt(out, SignedRecordVersion, 10)
	out = append(out, `,"term":`...)
	out = strconv.AppendUint(out, term, 10)
	out = append(out, `,"mac":"`...)
	out = append(out, sum...)
	out = append(out, `","body":`...)
	out = append(out, body...)
	return append(out, '}'), nil
}

// SealJSON marshals v and seals it (see Seal).
func (k *Keyring) SealJSON(etcdKey string, term uint64, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode record for %s: %w", etcdKey, err)
	}
	return k.Seal(etcdKey, term, body)
}

// Open verifies a signed record read from etcdKey and returns its body and
// term. The error wraps ErrUnsigned or ErrBadSignature. The term is not
// judged here: the caller compares it with the leader key.
//
// A value in the exact form Seal writes is taken apart without a JSON
// parse (see canonicalRecord): its MAC then proves that Seal wrote these
// bytes, so the body is the JSON Seal checked. Any other value, or one of
// that form whose MAC does not verify, goes through DecodeSignedRecord, as
// every value did before: a value is accepted exactly when it was before,
// except that a canonical one is not parsed twice.
func (k *Keyring) Open(etcdKey string, value []byte) (body []byte, term uint64, err error) {
	if rec, ok := canonicalRecord(value); ok {
		if body, term, err := k.verify(etcdKey, rec); err == nil {
			return body, term, nil
		}
	}
	rec, err := DecodeSignedRecord(value)
	if err != nil {
		return nil, 0, err
	}
	return k.verify(etcdKey, rec)
}

// verify checks rec's MAC against every key of the ring; the error wraps
// ErrBadSignature.
func (k *Keyring) verify(etcdKey string, rec SignedRecord) ([]byte, uint64, error) {
	got, err := base64.RawURLEncoding.DecodeString(rec.MAC)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: malformed mac", ErrBadSignature)
	}
	for _, key := range k.keys {
		if hmac.Equal(got, mac(key, etcdKey, rec.Term, rec.Body)) {
			return rec.Body, rec.Term, nil
		}
	}
	return nil, 0, fmt.Errorf("%w for %s", ErrBadSignature, etcdKey)
}

// canonicalRecord takes apart a value in the exact form Seal writes,
// {"v":1,"term":<digits>,"mac":"<base64url>","body":<body>}, with no
// whitespace, the term without leading zeros and within uint64, and the
// body everything up to the final '}'. It does not check that the body is
// JSON: only a verified MAC makes the record usable, and Seal checked the
// body before signing it. Where the whole value is valid JSON,
// DecodeSignedRecord returns the same record (FuzzOpenRecord checks it).
func canonicalRecord(value []byte) (SignedRecord, bool) {
	const head = `{"v":1,"term":`
	rest, ok := bytes.CutPrefix(value, []byte(head))
	if !ok {
		return SignedRecord{}, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && rest[0] == '0') {
		return SignedRecord{}, false
	}
	term, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if err != nil {
		return SignedRecord{}, false
	}
	if rest, ok = bytes.CutPrefix(rest[n:], []byte(`,"mac":"`)); !ok {
		return SignedRecord{}, false
	}
	m := 0
	for m < len(rest) && isBase64URL(rest[m]) {
		m++
	}
	sum := rest[:m]
	if m == 0 {
		return SignedRecord{}, false
	}
	if rest, ok = bytes.CutPrefix(rest[m:], []byte(`","body":`)); !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return SignedRecord{}, false
	}
	return SignedRecord{V: SignedRecordVersion, Term: term, MAC: string(sum), Body: rest[:len(rest)-1]}, true
}

// plainJSON reports whether b is one JSON value with no space around it,
// as json.Marshal writes: the body of a canonical record that is, then
// DecodeSignedRecord's too.
func plainJSON(b []byte) bool {
	return json.Valid(b) && len(bytes.TrimSpace(b)) == len(b)
}

func isBase64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// DecodeSignedRecord parses a signed record without verifying it (servers
// reading their own records use it; a node must use Keyring.Open). The
// error wraps ErrUnsigned for anything that is not a version-1 envelope
// with a body and a MAC.
func DecodeSignedRecord(value []byte) (SignedRecord, error) {
	var rec SignedRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return SignedRecord{}, fmt.Errorf("%w: %w", ErrUnsigned, err)
	}
	if rec.V != SignedRecordVersion || rec.MAC == "" || len(rec.Body) == 0 {
		return SignedRecord{}, fmt.Errorf("%w: no version-%d envelope", ErrUnsigned, SignedRecordVersion)
	}
	return rec, nil
}

// RecordBody returns the record of an etcd value that may be signed or
// plain JSON: the body of a signed record, else the value itself. For
// readers that do not act on the record (servers, the API), never for a
// node deciding to act.
func RecordBody(value []byte) []byte {
	if rec, ok := canonicalRecord(value); ok && plainJSON(rec.Body) {
		return rec.Body // what DecodeSignedRecord would return, in one pass
	}
	if rec, err := DecodeSignedRecord(value); err == nil {
		return rec.Body
	}
	return value
}

package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSealOpenRotation(t *testing.T) {
	t.Parallel()
	old, err := KeyringFromTokens("old-token")
	require.NoError(t, err)
	rotated, err := KeyringFromTokens("new-token", "old-token")
	require.NoError(t, err)
	key := NewKeys("").Run("n1", "1-1")
	v, err := old.SealJSON(key, 3, Dispatch{FireID: "1-1", Term: 3})
	require.NoError(t, err)
	body, term, err := rotated.Open(key, v)
	require.NoError(t, err, "the previous key still verifies")
	require.Equal(t, uint64(3), term)
	d, err := DecodeDispatch(body, "1-1", term)
	require.NoError(t, err)
	require.Equal(t, "1-1", d.FireID)

	v2, err := rotated.Seal(key, 3, body)
	require.NoError(t, err)
	_, _, err = old.Open(key, v2)
	require.ErrorIs(t, err, ErrBadSignature, "the new key is not the old one")
	_, _, err = rotated.Open(key, bytes.Replace(v2, []byte(`"term":3`), []byte(`"term":4`), 1))
	require.ErrorIs(t, err, ErrBadSignature, "the term is signed")
	_, _, err = rotated.Open(key, []byte(`{"fire_id":"1-1"}`))
	require.ErrorIs(t, err, ErrUnsigned)
	_, err = DecodeDispatch(body, "1-2", term)
	require.Error(t, err, "fire id must match its key")
	_, err = DecodeDispatch(body, "1-1", term+1)
	require.Error(t, err, "the dispatch's own term must be the signed one")
	_, _, err = rotated.Open(key, bytes.Replace(v2, []byte(`"body":{`), []byte(`"body": {`), 1))
	require.NoError(t, err, "a sealed record spaced out is still the record (read by the JSON decoder)")
	tampered := bytes.Replace(v2, []byte(`"body":{`), []byte(`"body":{"x":1,`), 1)
	_, _, err = rotated.Open(key, tampered)
	require.ErrorIs(t, err, ErrBadSignature, "the body is signed")
	// A forged canonical value that carries a real record after its body
	// is still judged by the JSON decoder, as before (the last term, MAC
	// and body win), and verifies only as that record.
	var real SignedRecord
	require.NoError(t, json.Unmarshal(v2, &real))
	smuggled := []byte(`{"v":1,"term":9,"mac":"AAAA","body":{"x":1},"term":3,"mac":"` + real.MAC + `","body":` + string(real.Body) + `}`)
	gotBody, gotTerm, err := rotated.Open(key, smuggled)
	require.NoError(t, err)
	require.Equal(t, uint64(3), gotTerm)
	require.JSONEq(t, string(real.Body), string(gotBody))
	for _, bad := range []string{`{"v":1,"term":03,"mac":"AAAA","body":{}}`, `{"v":1,"term":18446744073709551616,"mac":"AAAA","body":{}}`,
		`{"v":1,"term":3,"mac":"","body":{}}`, `{"v":1,"term":3,"mac":"A+/=","body":{}}`, `{"v":1,"term":3,"mac":"AAAA","body":}`} {
		_, ok := canonicalRecord([]byte(bad))
		require.False(t, ok, bad)
	}
	canon, ok := canonicalRecord(v2)
	require.True(t, ok, "Seal writes the canonical form")
	require.Equal(t, real.MAC, canon.MAC)
	require.Equal(t, []byte(real.Body), []byte(canon.Body))
	require.Equal(t, body, RecordBody(v2))
	require.Equal(t, []byte(`{"x":1}`), RecordBody([]byte(`{"x":1}`)))
}

// FuzzOpenRecord feeds arbitrary etcd values to the record decoders a node
// and a server use (signed envelope, dispatch, leader value, keys): they
// never panic, only a value sealed with the key verifies, and whatever
// verifies round-trips. `make test` runs it briefly.
func FuzzOpenRecord(f *testing.F) {
	ring, err := KeyringFromTokens("fuzz-token")
	if err != nil {
		f.Fatal(err)
	}
	keys := NewKeys("")
	sealed, err := ring.SealJSON(keys.Run("n1", "1-1"), 2, Dispatch{FireID: "1-1", Trigger: TriggerSchedule,
		ScheduledAt: time.Unix(0, 0).UTC(), Job: JobConfig{JobID: 1, Handler: "shell"}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "{}", "null", `{"v":1}`, `{"v":1,"term":1,"mac":"x","body":{}}`,
		`{"v":1,"term":18446744073709551615,"mac":"","body":[]}`, string(sealed), "00000000000000000001/s1",
		"/Cronix/run/n1/1-1", "/Cronix/proc/n/1/2", `{"fire_id":"1-1","term":1}`} {
		f.Add("1-1", []byte(s))
	}
	f.Fuzz(func(t *testing.T, fire string, value []byte) {
		key := keys.Run("n1", fire)
		body, term, err := ring.Open(key, value)
		if err == nil {
			if !bytes.Equal(value, sealed) {
				// Only a value this key sealed verifies; re-sealing gives the same MAC.
				again, serr := ring.Seal(key, term, body)
				if serr != nil || !bytes.Equal(RecordBody(again), body) {
					t.Fatalf("verified a value that does not re-seal: %q", value)
				}
			}
			_, _ = DecodeDispatch(body, fire, term)
		} else if !errors.Is(err, ErrUnsigned) && !errors.Is(err, ErrBadSignature) {
			t.Fatalf("Open error of an unknown kind: %v", err)
		}
		if rec, ok := canonicalRecord(value); ok {
			// Open's shortcut takes apart what the JSON decoder would: the
			// same record wherever the body is one JSON value as Seal
			// writes it (json.Marshal's, no surrounding space).
			if plainJSON(rec.Body) {
				dec, derr := DecodeSignedRecord(value)
				if derr != nil || dec.Term != rec.Term || dec.MAC != rec.MAC || !bytes.Equal(dec.Body, rec.Body) {
					t.Fatalf("canonical %+v, decoded %+v (%v) for %q", rec, dec, derr, value)
				}
			}
		}
		_ = RecordBody(value)
		var d Dispatch
		if json.Unmarshal(value, &d) == nil {
			_, _ = DecodeDispatch(value, fire, d.Term)
		}
		_, _, _ = ParseLeaderValue(string(value))
		_, _, _ = keys.ParseRunKey(string(value))
		_, _, _, _ = keys.ParseProcKey(string(value))
		_, _, _ = keys.ParseJobKey(string(value))
		_, _ = JobIDOfFire(string(value))
	})
}

// BenchmarkOpen: a dispatch record as Seal writes it (taken apart without
// a JSON parse) and the same record with one space, which goes through
// the JSON decoder as every record did before.
func BenchmarkOpen(b *testing.B) {
	ring, err := KeyringFromTokens("bench-token")
	require.NoError(b, err)
	key := NewKeys("").Run("n1", "17-1700000001000")
	v, err := ring.SealJSON(key, 7, Dispatch{FireID: "17-1700000001000", Trigger: TriggerSchedule, Term: 7,
		ScheduledAt: time.Unix(1700000001, 0).UTC(), Job: JobConfig{JobID: 17, Name: "http-00017", Handler: "http",
			Params: json.RawMessage(`{"url":"http://127.0.0.1:40000/j/17"}`), TimeoutSeconds: 60}})
	require.NoError(b, err)
	for name, value := range map[string][]byte{"canonical": v, "json": bytes.Replace(v, []byte(`"body":{`), []byte(`"body": {`), 1)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ring.Open(key, value); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Package canon defines the canonical JSON form and the hashes built on it.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// JSON is the byte form hashed for ids: the value marshalled by
// encoding/json, then re-encoded with object keys sorted by their UTF-8
// bytes, no insignificant whitespace, no HTML escaping, and numbers kept as
// written.
func JSON(v any) ([]byte, error) {
	first, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(first))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // maps are encoded with sorted keys
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// SHA256Hex is the lowercase hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RepeatedKey returns a key that the JSON object raw holds twice at its top
// level (it does not look into the values); ok is false when there is none,
// also when raw is not an object. encoding/json keeps the last of two equal
// keys silently; a reader of a file that must mean one thing refuses them.
func RepeatedKey(raw []byte) (key string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ = t.(string)
		if seen[key] {
			return key, true
		}
		seen[key] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
}

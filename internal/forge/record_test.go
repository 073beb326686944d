package forge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeRecord(t *testing.T) {
	const whole = `{"forge":"github","repo":"acme/calc","number":7,"url":"https://github.com/acme/calc/pull/7","state":"open","draft":true,` +
		`"head":"factory/abc","base":"main","commit":"0123456789abcdef0123456789abcdef01234567","action":"created","pushed":true}`
	tests := []struct {
		name, data string
		want       string // the error's text; "" decodes
	}{
		{"as factory writes it", whole, ""},
		{"fields left out", `{"forge":"gitea","number":1}`, ""},
		{"unknown field", `{"number":1,"token":"x"}`, "unknown field"},
		{"wrong type", `{"number":"7"}`, "number"},
		{"duplicate key", `{"url":"https://a","url":"javascript:x"}`, "duplicate"},
		{"trailing data", whole + ` {}`, "after the top-level value"},
		{"not an object", `[1]`, "pr.json is not a record factory wrote"},
		{"null", `null`, "null"},
		{"invalid UTF-8", "{\"repo\":\"\xff\"}", "UTF-8"},
		{"too large", `{"repo":"` + strings.Repeat("a", MaxRecordBytes) + `"}`, "larger than 64 KiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRecord([]byte(tt.data))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("DecodeRecord: %v", err)
			case tt.want == "" && r == nil:
				t.Fatal("no record and no error")
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("DecodeRecord = %+v, %v; want an error saying %q", r, err, tt.want)
			}
		})
	}
}

func TestReadRecord(t *testing.T) {
	dir := t.TempDir()
	if r, err := ReadRecord(dir); r != nil || err != nil {
		t.Fatalf("a build never published: %+v, %v; want nil, nil", r, err)
	}
	if err := os.WriteFile(filepath.Join(dir, RecordFile), []byte(`{"number":3,"state":"merged"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := ReadRecord(dir); err != nil || r.Number != 3 || r.State != Merged {
		t.Fatalf("ReadRecord = %+v, %v", r, err)
	}
	if err := os.WriteFile(filepath.Join(dir, RecordFile), []byte(`{"number":3`), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := ReadRecord(dir); err == nil {
		t.Fatalf("a cut record read as %+v", r)
	}
}

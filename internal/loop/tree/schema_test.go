package tree

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// librarySchema is SchemaV1 compiled by a JSON Schema library: the oracle
// for validateSchema, which the binary uses instead (see its comment).
var librarySchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaV1))
	if err != nil {
		return nil, err
	}
	const url = "https://factory.invalid/schemas/task_tree/v1.schema.json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
})

// checkAgreement fails when validateSchema and the library disagree on
// whether data (syntactically valid JSON) is valid.
func checkAgreement(t *testing.T, data []byte) {
	t.Helper()
	if checkSyntax(data) != nil {
		return // Decode refuses it before either runs
	}
	sch, err := librarySchema()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return
	}
	libErr := sch.Validate(inst)
	ours := validateSchema(data)
	if (libErr == nil) != (len(ours) == 0) {
		t.Fatalf("validateSchema and the library disagree on\n%s\nours: %v\nlibrary: %v", data, Problems(ours), libErr)
	}
}

func TestSchemaAgreement(t *testing.T) {
	valid := `{"id":"root","order":0,"title":"t","goal":"g","acceptance":["a"],"passes":false,"attempts":0,"max_attempts":3,"children":[]}`
	cases := []string{
		valid,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":1.0,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":1.5,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":1e3,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":1e7,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":-1,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":1000000,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":1000001,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":"1","title":"t","goal":"g","acceptance":[]}`,
		`{"id":"Root","order":0,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"r\n","order":0,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"` + strings.Repeat("a", 64) + `","order":0,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"` + strings.Repeat("a", 65) + `","order":0,"title":"t","goal":"g","acceptance":[]}`,
		`{"id":"root","order":0,"title":"","goal":"g","acceptance":[]}`,
		`{"id":"root","order":0,"title":"` + strings.Repeat("é", 200) + `","goal":"g","acceptance":[]}`,
		`{"id":"root","order":0,"title":"` + strings.Repeat("é", 201) + `","goal":"g","acceptance":[]}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[""]}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[1]}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":{}}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[` + strings.Repeat(`"a",`, 50) + `"a"]}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"passes":"true"}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"attempts":1001}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"max_attempts":0}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"status":"done"}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"children":[{"id":"a"}]}`,
		`{"id":"root","order":0,"title":"t","goal":"g","acceptance":[],"children":[null]}`,
		`{"order":0,"goal":"g"}`,
		`{}`, `[]`, `null`, `"x"`, `1`,
	}
	for _, c := range cases {
		checkAgreement(t, []byte(c))
	}
	// And every input the fuzzers kept.
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if in, ok := corpusBytes(data); ok {
			checkAgreement(t, in)
		}
	}
}

// corpusBytes reads the []byte of a one-argument go fuzz corpus file.
func corpusBytes(data []byte) ([]byte, bool) {
	lines := strings.Split(string(data), "\n")
	if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		return nil, false
	}
	return []byte(s), true
}

package tree

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaV1 is the JSON Schema (draft 2020-12) of .runner/tree.json, as
// `factory loop init` writes it to schemas/task_tree/v1.schema.json.
//
//go:embed v1.schema.json
var SchemaV1 []byte

// SchemaPath is where the schema is written in a repository.
const SchemaPath = "schemas/task_tree/v1.schema.json"

const schemaURL = "https://factory.invalid/schemas/task_tree/v1.schema.json"

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaV1))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
})

// validateSchema checks syntactically valid JSON against SchemaV1 and
// returns every violation, by instance location.
func validateSchema(data []byte) []Problem {
	sch, err := compiled()
	if err != nil {
		panic(fmt.Sprintf("compile the embedded task tree schema: %v", err))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return []Problem{{Message: "invalid JSON: " + err.Error()}}
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if err == nil {
		return nil
	}
	if !errors.As(err, &ve) {
		return []Problem{{Message: "schema: " + err.Error()}}
	}
	var ps []Problem
	var collect func(u []jsonschema.OutputUnit)
	collect = func(us []jsonschema.OutputUnit) {
		for _, u := range us {
			// The inner units only say "validation failed"; the leaves say why.
			if u.Error != nil && len(u.Errors) == 0 {
				ps = append(ps, Problem{Path: u.InstanceLocation, Message: u.Error.String()})
			}
			collect(u.Errors)
		}
	}
	out := ve.DetailedOutput()
	collect([]jsonschema.OutputUnit{*out})
	if len(ps) == 0 {
		ps = append(ps, Problem{Path: out.InstanceLocation, Message: "does not match the task tree schema"})
	}
	return sortProblems(ps)
}

package workorder

import (
	"encoding/json"
	"fmt"

	"github.com/invopop/jsonschema"
)

// SchemaID is the base of the $id of published schemas.
const SchemaID = "https://github.com/factory-harness/factory/schema/"

// JSONSchema generates the JSON Schema of v's type from its Go definition, so
// the published schema files, the strict structured-output format sent to the
// model and the decoder cannot drift apart.
func JSONSchema(v any, name string) ([]byte, error) {
	r := &jsonschema.Reflector{
		RequiredFromJSONSchemaTags: true,
		DoNotReference:             true,
		ExpandedStruct:             true,
	}
	s := r.Reflect(v)
	s.ID = jsonschema.ID(SchemaID + name)
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal schema %s: %w", name, err)
	}
	return append(out, '\n'), nil
}

// PublishedSchemas maps file names under schema/ to their generated content.
func PublishedSchemas() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, v := range map[string]any{
		"manifest.schema.json":       &Manifest{},
		"work_order.schema.json":     &WorkOrder{},
		"write_proposal.schema.json": &WriteProposal{},
	} {
		b, err := JSONSchema(v, name)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// ProposalResponseSchema is the WriteProposal schema as a generic map, for
// the strict json_schema response format of Chat Completions.
func ProposalResponseSchema() (map[string]any, error) {
	return ResponseSchema(&WriteProposal{}, "write_proposal.schema.json")
}

// ResponseSchema is v's schema as a generic map, for a strict structured
// output format. Those accept a subset of JSON Schema; the $schema and $id
// keywords are metadata the servers do not need.
func ResponseSchema(v any, name string) (map[string]any, error) {
	b, err := JSONSchema(v, name)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "$schema")
	delete(m, "$id")
	return m, nil
}

package workorder

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

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
// the strict json_schema response format of Chat Completions. Strict mode
// wants every property required, so "writes" and "edits" are: the model
// sends an empty list for the form it does not use (ParseProposal accepts
// that, and an absent one).
func ProposalResponseSchema() (map[string]any, error) {
	m, err := ResponseSchema(&WriteProposal{}, "write_proposal.schema.json")
	if err != nil {
		return nil, err
	}
	props, _ := m["properties"].(map[string]any)
	required := []any{}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		required = append(required, k)
	}
	m["required"] = required
	delete(m, "anyOf") // strict mode allows no anyOf at the top; ParseProposal checks it
	return m, nil
}

// JSONSchemaExtend states in the published schema what ParseProposal
// checks: at least one write or one edit.
func (WriteProposal) JSONSchemaExtend(s *jsonschema.Schema) {
	nonEmpty := func(field string) *jsonschema.Schema {
		props := jsonschema.NewProperties()
		props.Set(field, &jsonschema.Schema{MinItems: &one})
		return &jsonschema.Schema{Required: []string{field}, Properties: props}
	}
	s.AnyOf = []*jsonschema.Schema{nonEmpty("writes"), nonEmpty("edits")}
}

var one uint64 = 1

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

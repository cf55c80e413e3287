package api

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// inputSchema is the input schema of In with plain types: every optional
// field that Go spells as a pointer (which jsonschema.For makes the union
// ["null", T]) is plain T. Clients read type unions badly: the MCP
// Inspector sends a number typed against ["null","number"] as a string,
// and Gemini-family models refuse such schemas. An absent field is how a
// tool call says "the default"; null is never needed.
func inputSchema[In any]() (*jsonschema.Schema, error) {
	sch, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("api: input schema: %w", err)
	}
	plainTypes(sch)
	return sch, nil
}

// plainTypes rewrites, in place and in every nested schema, a type union of
// "null" and one other type to that type.
func plainTypes(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && (s.Types[0] == "null" || s.Types[1] == "null") {
		t := s.Types[0]
		if t == "null" {
			t = s.Types[1]
		}
		s.Type, s.Types = t, nil
	}
	for _, p := range s.Properties {
		plainTypes(p)
	}
	plainTypes(s.Items)
	plainTypes(s.AdditionalProperties)
}

// hasUnion reports whether s or a schema nested in it has a type union.
func hasUnion(s *jsonschema.Schema) bool {
	if s == nil {
		return false
	}
	if len(s.Types) > 0 {
		return true
	}
	for _, p := range s.Properties {
		if hasUnion(p) {
			return true
		}
	}
	return hasUnion(s.Items) || hasUnion(s.AdditionalProperties)
}

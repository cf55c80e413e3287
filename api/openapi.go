package api

import (
	_ "embed"
	"net/http"
	"slices"
)

// openAPIDocument is the HTTP contract as an OpenAPI 3.1 document
// (docs/wire.md). It is generated from the wire types and the route table by
// TestOpenAPIDocument, which fails when it drifts from them.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API, as GET
// /openapi.json serves it: every route, request, response and error. The
// slice is a copy.
func OpenAPI() []byte { return slices.Clone(openAPIDocument) }

// openAPI serves GET /openapi.json, without the token: the document holds
// no secret, and tools fetch it before they are configured.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}

package api

import (
	"encoding/json"
	"io"
	"strings"
)

// NewEncoder returns a json.Encoder writing to w that leaves <, > and & as
// they are. encoding/json escapes them by default for HTML pages; everything
// corral encodes is read by programs and models, to which "\u003cdiv\u003e"
// and "\u0026\u0026" are noise that no longer matches the command's output.
// Every JSON corral writes (HTTP bodies, NDJSON events, MCP tool texts, the
// CLI's --json) goes through it.
func NewEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// jsonText is v as one line of JSON without HTML escaping, for an MCP tool
// text; a value that cannot be encoded yields its error as the text.
func jsonText(v any) string {
	var b strings.Builder
	if err := NewEncoder(&b).Encode(v); err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSuffix(b.String(), "\n")
}

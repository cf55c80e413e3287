package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// strictTarget is a request shape with what checkStrict must follow: an
// embedded struct, a pointer field, a map, a slice of structs, a field
// without a tag, an ignored field and an opaque one.
type strictTarget struct {
	ExecRequest
	Limits *struct {
		Pids int `json:"pids"`
	} `json:"limits,omitempty"`
	Items []struct {
		Name string `json:"name"`
	} `json:"items,omitempty"`
	Plain   string
	Ignored string          `json:"-"`
	Raw     json.RawMessage `json:"raw,omitempty"`
}

func TestCheckStrict(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[strictTarget]()
	tests := []struct {
		name, in, want string // want "" means accepted
	}{
		{"plain", `{"command":"x","env":{"A":"1"},"limits":{"pids":3},"items":[{"name":"a"}],"Plain":"p"}`, ""},   // every kind of field
		{"escaped key", `{"\u0063ommand":"x"}`, ""},                                                               // the same key, escaped
		{"surrogate pair", `{"command":"\ud83d\ude00"}`, ""},                                                      // a valid pair
		{"raw is opaque", `{"raw":{"Anything":1}}`, ""},                                                           // RawMessage keys are free
		{"duplicates in raw", `{"raw":{"a":1,"a":2}}`, `duplicate key "a" in raw at byte 14`},                     // but still unique
		{"duplicate", `{"command":"x", "command":"y"}`, `duplicate key "command" at byte 16`},                     // top level
		{"documented example", `{"command":"ls","command":"rm"}`, `duplicate key "command" at byte 16`},           // as docs/wire.md says
		{"escaped duplicate", `{"command":"x","\u0063ommand":"y"}`, `duplicate key "command" at byte 15`},         // decoded keys compared
		{"case", `{"Command":"x"}`, `key "Command" at byte 1 is not "command": keys are case-sensitive`},          // fold match
		{"long s", `{"\u017fession":"x"}`, `key "ſession" at byte 1 is not "session"`},                            // U+017F folds to s
		{"embedded case", `{"STDIN":"x"}`, `is not "stdin"`},                                                      // promoted field
		{"nested case", `{"limits":{"PIDS":1}}`, `key "PIDS" in limits at byte 11 is not "pids"`},                 // through a pointer
		{"slice element", `{"items":[{"name":"a"},{"name":"b","name":"c"}]}`, `duplicate key "name" in items[1]`}, // through a slice
		{"untagged field", `{"plain":"x"}`, `key "plain" at byte 1 is not "Plain"`},                               // Go name, exact
		{"ignored field", `{"Ignored":"x"}`, `unknown key "Ignored"`},                                             // json:"-"
		{"map duplicate", `{"env":{"A":"1","B":"2","A":"3"}}`, `duplicate key "A" in env at byte 24`},             // map keys
		{"map any key", `{"env":{"aNy":"1","ANY":"2"}}`, ""},                                                      // map keys are exact
		{"invalid UTF-8", "{\"command\":\"\xff\"}", `invalid UTF-8 at byte 12`},                                   // a stray byte
		{"overlong", "{\"command\":\"\xc0\xaf\"}", `invalid UTF-8 at byte 12`},                                    // overlong '/'
		{"lone high", `{"command":"a\ud800b"}`, `lone surrogate \ud800 in command at byte 13`},                    // no low half
		{"lone low", `{"command":"\udfff"}`, `lone surrogate \udfff in command at byte 12`},                       // no high half
		{"high high", `{"command":"\ud800\ud800"}`, `lone surrogate \ud800 in command at byte 12`},                // two highs
		{"escaped backslash", `{"command":"\\ud800"}`, ""},                                                        // not an escape
		{"malformed", `{"command":`, ""},                                                                          // left to encoding/json
		{"deep", strings.Repeat("[", 500) + strings.Repeat("]", 500), ""},                                         // nesting
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkStrict([]byte(tt.in), typ)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(Message(err), tt.want)):
				t.Errorf("got %v, want %q", err, tt.want)
			case err != nil && Code(err) != CodeInvalidArgument:
				t.Errorf("code %s", Code(err))
			}
		})
	}
}

// FuzzCheckStrict checks checkStrict against encoding/json, the reference
// for everything but strictness: on input encoding/json decodes, the strict
// decoder accepts it exactly when it is valid UTF-8 without lone
// surrogates, and its keys are unique and exact (by a reference walk with
// json.Decoder.Token), and then decodes the same value.
func FuzzCheckStrict(f *testing.F) {
	for _, s := range []string{
		`{"command":"echo hi","timeout":5,"env":{"A":"1"}}`,
		`{"command":"a","COMMAND":"b"}`,
		`{"command":"a","command":"b"}`,
		`{"env":{"A":"1","A":"2"}}`,
		`{"command":"\ud800"}`,
		`{"command":"\ud83d\ude00"}`,
		`{"comm\u0061nd":"x"}`,
		"{\"command\":\"\xff\"}",
		`{"stdin":null,"timeout":1e2,"cwd":"\/"}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	typ := reflect.TypeFor[ExecRequest]()
	f.Fuzz(func(t *testing.T, data []byte) {
		var ref ExecRequest
		dec := json.NewDecoder(bytes.NewReader(data))
		refErr := dec.Decode(&ref)
		if refErr == nil && dec.Decode(&json.RawMessage{}) != io.EOF {
			refErr = errors.New("trailing data")
		}
		strictErr := checkStrict(data, typ)
		if refErr != nil {
			return // encoding/json refuses it too (or for its own reasons)
		}
		strictOK := utf8.Valid(data) && !loneSurrogate(data) && exactUniqueKeys(data, typ)
		if strictOK != (strictErr == nil) {
			t.Fatalf("%q: checkStrict %v, reference says ok=%v", data, strictErr, strictOK)
		}
		if strictErr != nil {
			return
		}
		var got ExecRequest
		if err := decodeStrict(data, &got); err != nil {
			t.Fatalf("%q: decodeStrict %v after checkStrict accepted", data, err)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("%q: decoded %+v, encoding/json %+v", data, got, ref)
		}
	})
}

// loneSurrogate is the reference for surrogate escapes: decode every
// string literal with strconv-like rules and look for a \uXXXX in the
// surrogate range not paired high-then-low. It works on the raw text,
// tracking only string boundaries and escapes.
func loneSurrogate(data []byte) bool {
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\' && i+1 < len(data) && data[i+1] == 'u' && i+5 < len(data):
			r := hex4(data[i+2 : i+6])
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if i+11 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					if r2 := hex4(data[i+8 : i+12]); r2 >= 0xdc00 && r2 <= 0xdfff {
						i += 11
						continue
					}
				}
				return true
			case r >= 0xdc00 && r <= 0xdfff:
				return true
			}
			i += 5
		case c == '\\':
			i++
		}
	}
	return false
}

// exactUniqueKeys is the reference for keys, by json.Decoder.Token: every
// object's keys are unique, and those of ExecRequest (the top level) and
// of its env are exact (env keys are free; the top-level keys must be
// ExecRequest's JSON names). Only ExecRequest's shape is modelled: a
// top-level object whose env member is the only nested object with keys
// to check beyond uniqueness.
func exactUniqueKeys(data []byte, typ reflect.Type) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	names := jsonFields(typ)
	var walk func(depth int, top bool) bool
	walk = func(depth int, top bool) bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				key := k.(string)
				if seen[key] {
					return false
				}
				seen[key] = true
				if top {
					if _, ok := names[key]; !ok {
						return false
					}
				}
				if !walk(depth+1, false) {
					return false
				}
			}
			dec.Token() // }
		case json.Delim('['):
			for dec.More() {
				if !walk(depth+1, false) {
					return false
				}
			}
			dec.Token() // ]
		}
		return true
	}
	return walk(0, true)
}

// benchBody is a typical exec request: a command, a timeout and an env.
var benchBody = []byte(`{"command":"go test ./... 2>&1 | tail -50","timeout":120,"cwd":"/tmp","env":{"GOFLAGS":"-count=1","CI":"1"},"session":"s-1"}`)

// BenchmarkDecodeStrict measures decodeStrict on benchBody; compare
// BenchmarkDecodePlain, encoding/json alone.
func BenchmarkDecodeStrict(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var v ExecRequest
		if err := decodeStrict(benchBody, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePlain(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var v ExecRequest
		dec := json.NewDecoder(bytes.NewReader(benchBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			b.Fatal(err)
		}
	}
}

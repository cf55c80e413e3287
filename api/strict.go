package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Requests are decoded strictly (docs/wire.md, Errors): what a client sends
// must mean one thing to every reader. encoding/json alone would take
// {"command":"echo allowed","COMMAND":"echo other"} as the second command
// (it matches keys case-insensitively and lets the last duplicate win),
// and would turn invalid UTF-8 and lone surrogate escapes into U+FFFD, so
// a filtering proxy in front could approve one command while corral runs
// another. checkStrict refuses all of these before encoding/json decodes;
// every request body and every MCP tool call's arguments pass through it.

// decode reads one JSON object of at most MaxBodyBytes into v strictly
// (decodeStrict).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errorf(ErrTooLarge, "the body exceeds %d bytes", MaxBodyBytes)
	case errors.Is(err, ErrBodyTimeout):
		return err
	case err != nil:
		return errorf(ErrInvalidArgument, "reading the body: %v", err)
	}
	return decodeStrict(data, v)
}

// strictBody refuses a POSTed MCP message that checkStrict refuses (say,
// two "arguments" keys in a tools/call's params, of which the SDK would take
// the last) with the error JSON, before the MCP handler decodes it. Tool
// arguments are checked against their tool's input type again by
// strictArguments, which also serves stdio.
func strictBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			err = errorf(ErrTooLarge, "the body exceeds %d bytes", MaxBodyBytes)
		case errors.Is(err, ErrBodyTimeout):
		case err != nil:
			err = errorf(ErrInvalidArgument, "reading the body: %v", err)
		default:
			err = checkStrict(data, nil)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, r)
	})
}

// decodeStrict decodes data, one JSON object, into v (a pointer to a
// struct), refusing what checkStrict refuses, unknown keys, wrong types and
// trailing data, each with an ErrInvalidArgument error naming the problem.
func decodeStrict(data []byte, v any) error {
	if err := checkStrict(data, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.Decode(&json.RawMessage{}) != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return errorf(ErrInvalidArgument, "field %s: expected %s, got %s", typeErr.Field, typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &typeErr):
		return errorf(ErrInvalidArgument, "expected a JSON object, got %s", typeErr.Value)
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(ErrInvalidArgument, "malformed JSON: %v", err)
	case errors.Is(err, io.EOF):
		return errorf(ErrInvalidArgument, "the body is empty; a JSON object is required")
	}
	// Unknown fields and trailing data: encoding/json has no typed error.
	return errorf(ErrInvalidArgument, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// typeName turns a Go type into the JSON word for it.
func typeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["):
		return "object"
	case strings.Contains(goType, "int"), strings.Contains(goType, "float"):
		return "number"
	case strings.Contains(goType, "string"):
		return "string"
	case strings.Contains(goType, "bool"):
		return "boolean"
	}
	return goType
}

// checkStrict returns an ErrInvalidArgument error for the first thing in
// data that encoding/json would read differently from a strict reader:
// invalid UTF-8, a lone surrogate escape (\ud800 without its pair), a
// duplicate key in any object at any depth, or a key of an object decoded
// into a struct of t that is not one of its JSON names exactly (a name that
// differs only in case, or an unknown one). t guides the key check into
// nested structs, maps and slices; nil checks all but key names. Each error
// names the key and the byte offset. Malformed syntax is left to
// encoding/json, which names it better: checkStrict then returns nil.
func checkStrict(data []byte, t reflect.Type) error {
	if !utf8.Valid(data) {
		return errorf(ErrInvalidArgument, "invalid UTF-8 at byte %d", invalidUTF8(data))
	}
	if !json.Valid(data) {
		return nil
	}
	sc := scanner{data: data}
	return sc.value(t, "")
}

// invalidUTF8 is the offset of the first byte of data that is not part of
// valid UTF-8.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// scanner walks a syntactically valid JSON text (json.Valid), so it does
// not check syntax; encoding/json bounds its nesting (10,000 levels), which
// bounds the recursion here.
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// value checks the value at pos, headed for a Go value of type t (nil:
// unknown) at path (a dotted key path, "" at the top).
func (s *scanner) value(t reflect.Type, path string) error {
	t = deref(t)
	s.skipSpace()
	switch s.data[s.pos] {
	case '{':
		return s.object(t, path)
	case '[':
		return s.array(t, path)
	case '"':
		_, err := s.str(false, path)
		return err
	}
	// A number or a literal.
	for s.pos < len(s.data) && !strings.ContainsRune(",]} \t\r\n", rune(s.data[s.pos])) {
		s.pos++
	}
	return nil
}

func (s *scanner) object(t reflect.Type, path string) error {
	s.pos++ // {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := make(map[string]struct{})
	for {
		s.skipSpace()
		if s.data[s.pos] == '}' {
			s.pos++
			return nil
		}
		if s.data[s.pos] == ',' {
			s.pos++
			s.skipSpace()
		}
		at := s.pos
		key, err := s.str(true, path)
		if err != nil {
			return err
		}
		if _, dup := seen[key]; dup {
			return errorf(ErrInvalidArgument, "duplicate key %q%s at byte %d", key, in(path), at)
		}
		seen[key] = struct{}{}
		vt := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return keyError(fields, key, path, at)
			}
			vt = ft
		}
		s.skipSpace()
		s.pos++ // :
		if err := s.value(vt, join(path, key)); err != nil {
			return err
		}
		s.skipSpace()
	}
}

// keyError names a key that is no JSON name of the struct: one that
// encoding/json would still match case-insensitively, or an unknown one.
func keyError(fields map[string]reflect.Type, key, path string, at int) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return errorf(ErrInvalidArgument, "key %q%s at byte %d is not %q: keys are case-sensitive", key, in(path), at, name)
		}
	}
	return errorf(ErrInvalidArgument, "unknown key %q%s at byte %d", key, in(path), at)
}

func (s *scanner) array(t reflect.Type, path string) error {
	s.pos++ // [
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	for i := 0; ; i++ {
		s.skipSpace()
		if s.data[s.pos] == ']' {
			s.pos++
			return nil
		}
		if s.data[s.pos] == ',' {
			s.pos++
		}
		if err := s.value(elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
}

// str reads the string at pos and refuses a lone surrogate escape; with
// want it returns the decoded string (for keys), else "".
func (s *scanner) str(want bool, path string) (string, error) {
	start := s.pos
	s.pos++ // "
	var b []byte
	escaped := false
	for {
		switch c := s.data[s.pos]; c {
		case '"':
			s.pos++
			if !want {
				return "", nil
			}
			if !escaped {
				return string(s.data[start+1 : s.pos-1]), nil
			}
			return string(b), nil
		case '\\':
			if want && !escaped {
				b = append(b, s.data[start+1:s.pos]...)
			}
			escaped = true
			if s.data[s.pos+1] != 'u' {
				b = append(b, unescape(s.data[s.pos+1]))
				s.pos += 2
				continue
			}
			r, err := s.codepoint(path)
			if err != nil {
				return "", err
			}
			b = utf8.AppendRune(b, r)
		default:
			if want && escaped {
				b = append(b, c)
			}
			s.pos++
		}
	}
}

// codepoint reads the \uXXXX escape at pos (two for a surrogate pair) and
// returns its code point; a surrogate without its pair is an error, where
// encoding/json would silently read U+FFFD.
func (s *scanner) codepoint(path string) (rune, error) {
	at := s.pos
	r := hex4(s.data[s.pos+2 : s.pos+6])
	s.pos += 6
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if r < 0xdc00 && s.pos+6 <= len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
		if r2 := hex4(s.data[s.pos+2 : s.pos+6]); r2 >= 0xdc00 && r2 <= 0xdfff {
			s.pos += 6
			return utf16.DecodeRune(r, r2), nil
		}
	}
	return 0, errorf(ErrInvalidArgument, "lone surrogate %s%s at byte %d: a UTF-16 surrogate escape must be a high-low pair",
		s.data[at:at+6], in(path), at)
}

// hex4 decodes four hex digits (json.Valid checked them).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unescape is the byte a one-character escape stands for.
func unescape(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // " \ /
}

// in names path in an error ("" at the top).
func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// deref strips pointers; types that decode themselves (json.Unmarshaler,
// json.RawMessage) are opaque: nil.
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	fieldCache      sync.Map // reflect.Type -> map[string]reflect.Type
)

// jsonFields maps the JSON names of struct t's fields, those of embedded
// structs included, as encoding/json names them, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := make(map[string]reflect.Type)
	addFields(fields, t)
	fieldCache.Store(t, fields)
	return fields
}

// addFields adds t's own fields first, then those of its embedded structs,
// so that a shallower field wins as in encoding/json.
func addFields(fields map[string]reflect.Type, t reflect.Type) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := fields[name]; !ok {
			fields[name] = ft
		}
	}
	for _, et := range embedded {
		addFields(fields, et)
	}
}

package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/spill"
)

// ReadRequest is the body of POST /v1/read and the arguments of the MCP
// tool read_output.
type ReadRequest struct {
	// Path is a spill file path, absolute or relative to the data directory.
	Path string `json:"path" jsonschema:"the spill file path named in a truncation marker or in stdoutInfo.spillPath / stderrInfo.spillPath"`
	// Offset is the 1-based first line; 0 means 1.
	Offset int `json:"offset,omitempty" jsonschema:"1-based first line of the window (default 1)"`
	// Limit is the number of lines; 0 means 2,000.
	Limit int `json:"limit,omitempty" jsonschema:"number of lines in the window (default and most useful 2000; the window also stops at 48 KiB)"`
}

// GrepRequest is the body of POST /v1/grep and the arguments of the MCP
// tool grep_output.
type GrepRequest struct {
	// Path is a spill file path, absolute or relative to the data directory.
	Path string `json:"path" jsonschema:"the spill file path named in a truncation marker or in stdoutInfo.spillPath / stderrInfo.spillPath"`
	// Pattern is a regular expression (Go RE2 syntax).
	Pattern string `json:"pattern" jsonschema:"regular expression (RE2 syntax) matched against each line"`
	// HeadLimit caps the matches returned; 0 means 200.
	HeadLimit int `json:"headLimit,omitempty" jsonschema:"most matches to return (default 200); more set truncated: true"`
}

// ErrSpillsDisabled is returned by read and grep when the supervisor has no
// data directory: there is nothing to read (NOT_FOUND on the wire).
var ErrSpillsDisabled error = &wireError{kind: spill.ErrNotFound, reason: "this server keeps no spill files"}

// open opens a client's path as a spill file beneath the data directory
// (spill.Store.Open: no symlink followed, regular files only, never
// blocking on a FIFO) and returns it with its name, size and extent.
func (s *Server) open(path string) (*os.File, int64, spill.Extent, error) {
	st := s.sup.Sessions().Spills()
	if st == nil {
		return nil, 0, spill.Extent{}, ErrSpillsDisabled
	}
	f, ext, err := st.Open(path)
	if err != nil {
		var oe *spill.OpenError
		if errors.As(err, &oe) {
			return nil, 0, spill.Extent{}, &wireError{kind: spill.ErrNotFound,
				reason: fmt.Sprintf("no spill file %q: %s", path, oe.Reason), cause: err}
		}
		return nil, 0, spill.Extent{}, fmt.Errorf("api: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, spill.Extent{}, fmt.Errorf("api: %s: %w", f.Name(), err)
	}
	return f, fi.Size(), ext, nil
}

// withExtent joins the extent's sentence on a partial spill to a notice.
func withExtent(notice string, ext spill.Extent) string {
	if n := ext.Notice(); n != "" {
		return strings.TrimSpace(n + " " + notice)
	}
	return notice
}

// readSpill reads a window of a spill file.
func (s *Server) readSpill(in ReadRequest) (budget.ReadResult, error) {
	f, size, ext, err := s.open(in.Path)
	if err != nil {
		return budget.ReadResult{}, err
	}
	defer f.Close()
	res, err := budget.Read(f, f.Name(), size, budget.ReadOptions{Offset: in.Offset, Limit: in.Limit})
	if err != nil {
		return budget.ReadResult{}, spillError(err, in.Path, fmt.Sprintf("offset and limit must not be negative, got offset %d, limit %d", in.Offset, in.Limit))
	}
	res.Root = "scratch"
	res.Partial = ext.Partial()
	res.Notice = withExtent(res.Notice, ext)
	return res, nil
}

// grepSpill searches a spill file. Unlike a directory search, which skips
// binary files, a search of one named file refuses binary content, so the
// caller learns why nothing matched.
func (s *Server) grepSpill(in GrepRequest) (budget.GrepResult, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return budget.GrepResult{}, errorf(ErrInvalidArgument, "pattern: %v", err)
	}
	f, _, ext, err := s.open(in.Path)
	if err != nil {
		return budget.GrepResult{}, err
	}
	defer f.Close()
	name := f.Name()
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return budget.GrepResult{}, fmt.Errorf("api: grep %s: %w", name, err)
	}
	if budget.IsBinary(name, head[:n]) {
		return budget.GrepResult{}, spillError(budget.ErrBinary, in.Path, "")
	}
	r := io.MultiReader(bytes.NewReader(head[:n]), f)
	res, err := budget.Grep(r, name, re, budget.GrepOptions{HeadLimit: in.HeadLimit})
	if err != nil {
		return budget.GrepResult{}, spillError(err, in.Path, fmt.Sprintf("headLimit must not be negative, got %d", in.HeadLimit))
	}
	res.Partial = ext.Partial()
	res.Notice = withExtent(res.Notice, ext)
	return res, nil
}

// spillError gives an error of budget.Read or budget.Grep its wire
// message: binary content names the path, an invalid argument says
// invalid; anything else is an internal failure.
func spillError(err error, path, invalid string) error {
	switch {
	case errors.Is(err, budget.ErrBinary):
		return &wireError{kind: budget.ErrBinary, cause: err,
			reason: fmt.Sprintf("%q holds binary content, which is not shown; it has no text lines to read or search", path)}
	case errors.Is(err, budget.ErrInvalid):
		return &wireError{kind: budget.ErrInvalid, reason: invalid, cause: err}
	}
	return fmt.Errorf("api: %w", err)
}

func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	var in ReadRequest
	if err := decode(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.readSpill(in)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) grep(w http.ResponseWriter, r *http.Request) {
	var in GrepRequest
	if err := decode(w, r, &in); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.grepSpill(in)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

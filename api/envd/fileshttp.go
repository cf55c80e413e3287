package envd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"connectrpc.com/connect"

	"github.com/corral-sh/corral/internal/confine"
)

// envdError is envd's error body on its HTTP routes: the HTTP status as
// code, and the message.
type envdError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func writeEnvdError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(envdError{Message: msg, Code: status}) // a client gone mid-answer is not ours to report
}

// writeFSError answers a Connect error of a file operation with envd's
// HTTP status for it: 404 only for a path that does not exist, so the SDKs
// never call a present file missing.
func writeFSError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		status = http.StatusNotFound
	case connect.CodeInvalidArgument:
		status = http.StatusBadRequest
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	case connect.CodeUnimplemented:
		status = http.StatusNotImplemented
	}
	var ce *connect.Error
	msg := err.Error()
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	writeEnvdError(w, status, msg)
}

// openFlags open a file to read: never blocking in open(2) (a FIFO without
// a writer would hold the handler), never becoming a controlling terminal.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// getFile serves GET /files?path=: the file's bytes.
func (f files) getFile(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	root, rel, err := f.resolve(p)
	if err != nil {
		writeFSError(w, err)
		return
	}
	file, err := root.OpenFile(rel, openFlags, 0)
	if err != nil {
		writeFSError(w, fsError(root, p, err))
		return
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		writeFSError(w, fsError(root, p, err))
		return
	}
	if !fi.Mode().IsRegular() {
		writeEnvdError(w, http.StatusBadRequest, fmt.Sprintf("path is not a regular file: %s (%v)", p, fi.Mode().Type()))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", fi.ModTime(), file) // streams; Range too
}

// uploaded is one written file, as envd's POST /files answers it.
type uploaded struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Path string `json:"path"`
}

// postFile serves POST /files: the raw body to ?path=, or each "file" part
// of a multipart/form-data upload to ?path= or, without one, to the part's
// file name. Parents are made; each file is written atomically.
func (f files) postFile(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	var out []uploaded
	write := func(path string, src io.Reader) bool {
		root, rel, err := f.resolve(path)
		if err == nil && rel == "." {
			err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is a directory: %s", path))
		}
		if err == nil {
			if fi, serr := root.Stat(rel); serr == nil && fi.IsDir() {
				err = connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is a directory: %s", path))
			} else if _, werr := root.WriteAtomic(rel, src, 0o644); werr != nil {
				err = fsError(root, path, werr)
			}
		}
		if err != nil {
			writeFSError(w, err)
			return false
		}
		out = append(out, uploaded{Name: filepath.Base(rel), Type: "file", Path: filepath.Join(root.Dir(), rel)})
		return true
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if p == "" {
			writeEnvdError(w, http.StatusBadRequest, "path is required")
			return
		}
		if !write(p, r.Body) {
			return
		}
	} else {
		mr, err := r.MultipartReader()
		if err != nil {
			writeEnvdError(w, http.StatusBadRequest, "invalid multipart body: "+err.Error())
			return
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				writeEnvdError(w, http.StatusBadRequest, "invalid multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				part.Close()
				continue
			}
			target := p
			if target == "" {
				target = part.FileName()
			}
			if target == "" {
				writeEnvdError(w, http.StatusBadRequest, "path is required (the query's path or the part's file name)")
				return
			}
			ok := write(target, part)
			part.Close()
			if !ok {
				return
			}
		}
		if len(out) == 0 {
			writeEnvdError(w, http.StatusBadRequest, `no "file" part in the upload`)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out) // a client gone mid-answer is not ours to report
}

// notServed answers every route corral's envd does not serve in envd's
// error shape, 501: never a 404, which the SDKs read as a missing file.
func notServed(w http.ResponseWriter, r *http.Request) {
	writeEnvdError(w, http.StatusNotImplemented, fmt.Sprintf("corral's envd does not serve %s %s", r.Method, r.URL.Path))
}

// openRoot opens the filesystem root of a Service: dir, else home; nil when
// neither is a directory.
func openRoot(dir, home, owner string) (*confine.Root, error) {
	if dir == "" {
		if fi, err := os.Stat(home); home == "" || err != nil || !fi.IsDir() {
			return nil, nil
		}
		dir = home
	}
	root, err := confine.Open(dir, owner)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("envd: root directory: %w", err)
	}
	return root, err
}

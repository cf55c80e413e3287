package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// workDir resolves a process's cwd beneath the root: "" is the root; an
// absolute cwd must lie beneath it; the directory must exist there,
// symlinks followed only as far as they stay inside.
func (s *Service) workDir(cwd string) (string, error) {
	rel, ok := s.root.Local(cwd)
	if !ok {
		return "", status.Errorf(codes.PermissionDenied, "cwd %q: a path outside the sandbox root %s is forbidden", cwd, s.rootDir)
	}
	fi, err := s.root.Stat(rel)
	switch {
	case s.root.Escapes(err):
		return "", status.Errorf(codes.PermissionDenied, "cwd %q: it leads outside the sandbox root %s (a symlink)", cwd, s.rootDir)
	case errors.Is(err, fs.ErrNotExist):
		return "", status.Errorf(codes.NotFound, "cwd %q does not exist beneath the sandbox root %s", cwd, s.rootDir)
	case err != nil:
		return "", status.Errorf(codes.InvalidArgument, "cwd %q: %v", cwd, err)
	case !fi.IsDir():
		return "", status.Errorf(codes.InvalidArgument, "cwd %q is not a directory", cwd)
	}
	return filepath.Join(s.rootDir, rel), nil
}

// target resolves the {path...} of a files request, answering 403 for one
// that climbs out of the root.
func (s *Service) target(w http.ResponseWriter, r *http.Request) (string, bool) {
	rel, ok := s.root.Local(r.PathValue("path"))
	if !ok {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "path traversal outside sandbox root is forbidden")
	}
	return rel, ok
}

// fileError answers err of a root operation on a path: 403 for an escape
// or a permission, 404 for a missing path, 500 else.
func (s *Service) fileError(w http.ResponseWriter, err error) {
	switch {
	case s.root.Escapes(err):
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "the path leads outside the sandbox root (a symlink); it is forbidden")
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		writeError(w, http.StatusNotFound, "NOT_FOUND", "path does not exist within the sandbox")
	case errors.Is(err, fs.ErrPermission):
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "permission denied")
	default:
		writeError(w, http.StatusInternalServerError, "INTERNAL", strings.ReplaceAll(err.Error(), s.rootDir, "<root>"))
	}
}

// openFlags open a file or directory to read: never blocking in open(2) (a
// FIFO without a writer would hold the handler), never becoming a
// controlling terminal.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

func (s *Service) getFile(w http.ResponseWriter, r *http.Request) {
	rel, ok := s.target(w, r)
	if !ok {
		return
	}
	f, err := s.root.OpenFile(rel, openFlags, 0)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		s.fileError(w, err)
		return
	}
	switch {
	case fi.IsDir():
		s.list(w, r, rel, f)
	case fi.Mode().IsRegular():
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", fi.ModTime(), f) // streams; HEAD and Range too
	default:
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("%s is not a regular file or a directory (%v)", r.PathValue("path"), fi.Mode().Type()))
	}
}

// list answers a directory listing, sorted by name. A symlink is listed as
// what it points at when that lies inside the root, and left out when it
// leads outside or nowhere, as sandboxd does.
func (s *Service) list(w http.ResponseWriter, r *http.Request, rel string, dir *os.File) {
	des, err := dir.ReadDir(-1)
	if err != nil {
		s.fileError(w, err)
		return
	}
	entries := make([]fileEntry, 0, len(des))
	for _, de := range des {
		var fi fs.FileInfo
		if de.Type()&fs.ModeSymlink != 0 {
			fi, err = s.root.Stat(filepath.Join(rel, de.Name()))
		} else {
			fi, err = de.Info()
		}
		if err != nil {
			continue // gone meanwhile, or a link out of the root or to nothing
		}
		kind := "file"
		if fi.IsDir() {
			kind = "directory"
		}
		entries = append(entries, fileEntry{Name: de.Name(), Size: fi.Size(), Type: kind,
			ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339), Mode: fmt.Sprintf("%04o", fi.Mode().Perm())})
	}
	slashed := "/" + filepath.ToSlash(rel)
	if rel == "." {
		slashed = "/"
	}
	writeJSON(w, http.StatusOK, listing{Path: slashed, Entries: entries})
}

var modePattern = regexp.MustCompile(`^0[0-7]{3}$`)

func (s *Service) putFile(w http.ResponseWriter, r *http.Request) {
	mode := fs.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		if !modePattern.MatchString(m) {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("mode %q must match ^0[0-7]{3}$", m))
			return
		}
		n, _ := strconv.ParseUint(m, 8, 32) // the pattern holds 4 octal digits
		mode = fs.FileMode(n)
	}
	rel, ok := s.target(w, r)
	if !ok {
		return
	}
	if rel == "." {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "target path is a directory (the sandbox root)")
		return
	}
	if fi, err := s.root.Stat(rel); err == nil && fi.IsDir() {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "target path is a directory")
		return
	}
	body, err := fileBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if _, err := s.root.WriteAtomic(rel, body, mode); err != nil {
		s.fileError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fileBody is the payload of a PUT: the raw body, or the "file" part of a
// multipart/form-data upload.
func fileBody(r *http.Request) (io.Reader, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return r.Body, nil
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fmt.Errorf("invalid multipart body: %w", err)
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, errors.New(`multipart body is missing the required "file" part`)
		}
		if err != nil {
			return nil, fmt.Errorf("invalid multipart body: %w", err)
		}
		if part.FormName() == "file" {
			return part, nil
		}
		part.Close()
	}
}

func (s *Service) deleteFile(w http.ResponseWriter, r *http.Request) {
	rel, ok := s.target(w, r)
	if !ok {
		return
	}
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("recursive %q must be a boolean", v))
			return
		}
		recursive = b
	}
	if _, err := s.root.Lstat(rel); err != nil {
		s.fileError(w, err)
		return
	}
	if rel == "." {
		if !recursive {
			writeError(w, http.StatusConflict, "CONFLICT", "cannot delete the sandbox root; pass recursive=true to clear its contents")
			return
		}
		if err := s.root.Clear(); err != nil {
			s.fileError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var err error
	if recursive {
		err = s.root.RemoveAll(rel)
	} else {
		err = s.root.Remove(rel)
	}
	switch {
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		writeError(w, http.StatusConflict, "CONFLICT", "directory is not empty; pass recursive=true to remove it")
	case err != nil:
		s.fileError(w, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/corral-sh/corral/api/envd/filesystempb"
	"github.com/corral-sh/corral/internal/confine"
)

// files implements filesystempbconnect.FilesystemHandler over the
// service's root. With no root every call answers Unimplemented.
type files struct {
	s *Service
}

// watchRefusal answers the watch calls.
var watchRefusal = connect.NewError(connect.CodeUnimplemented,
	errors.New("watching a directory is not served by corral's envd face; poll with list or stat instead"))

// noRoot answers a filesystem call when the service has no root.
var noRoot = connect.NewError(connect.CodeUnimplemented,
	errors.New("corral serves no filesystem here: start corral serve with --root-dir (or give the user commands run as a home directory)"))

// resolve turns an envd path into one relative to the root: an absolute
// path must lie beneath the root, a relative one is taken from the root.
func (f files) resolve(p string) (*confine.Root, string, error) {
	root := f.s.root
	if root == nil {
		return nil, "", noRoot
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	}
	rel, ok := root.Local(p)
	if !ok || filepath.IsAbs(p) && !beneath(root.Dir(), p) {
		return nil, "", connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("path %q is outside the sandbox root %s", p, root.Dir()))
	}
	return root, rel, nil
}

// beneath reports whether the absolute path p is dir or lies beneath it.
func beneath(dir, p string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// fsError turns an error of a root operation into a Connect error envd's
// clients branch on.
func fsError(root *confine.Root, p string, err error) error {
	switch {
	case root.Escapes(err):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("path %q leads outside the sandbox root (a symlink)", p))
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("file not found: %s", p))
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("path already exists: %s", p))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied: %s", p))
	}
	return connect.NewError(connect.CodeInternal, errors.New(strings.ReplaceAll(err.Error(), root.Dir(), "<root>")))
}

// entry describes rel as envd's EntryInfo: a symlink as a symlink, with
// its target and the size and mode of what it points at when that lies
// inside the root.
func entry(root *confine.Root, rel string) (*filesystempb.EntryInfo, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	e := &filesystempb.EntryInfo{Name: filepath.Base(filepath.Join(root.Dir(), rel)),
		Path: filepath.Join(root.Dir(), rel), Type: filesystempb.FileType_FILE_TYPE_FILE}
	if fi.Mode()&fs.ModeSymlink != 0 {
		e.Type = filesystempb.FileType_FILE_TYPE_SYMLINK
		if target, err := root.Readlink(rel); err == nil {
			e.SymlinkTarget = &target
		}
		if ti, err := root.Stat(rel); err == nil {
			fi = ti
		}
	} else if fi.IsDir() {
		e.Type = filesystempb.FileType_FILE_TYPE_DIRECTORY
	}
	e.Size, e.Mode, e.Permissions = fi.Size(), uint32(fi.Mode()), fi.Mode().String()
	e.Owner, e.Group = owners(fi)
	e.ModifiedTime = timestamppb.New(fi.ModTime())
	return e, nil
}

func (f files) Stat(ctx context.Context, req *connect.Request[filesystempb.StatRequest]) (*connect.Response[filesystempb.StatResponse], error) {
	root, rel, err := f.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := entry(root, rel)
	if err != nil {
		return nil, fsError(root, req.Msg.GetPath(), err)
	}
	return connect.NewResponse(&filesystempb.StatResponse{Entry: e}), nil
}

func (f files) MakeDir(ctx context.Context, req *connect.Request[filesystempb.MakeDirRequest]) (*connect.Response[filesystempb.MakeDirResponse], error) {
	p := req.Msg.GetPath()
	root, rel, err := f.resolve(p)
	if err != nil {
		return nil, err
	}
	if _, err := root.Lstat(rel); err == nil {
		return nil, fsError(root, p, fs.ErrExist)
	}
	if err := root.MakeDirs(rel); err != nil {
		return nil, fsError(root, p, err)
	}
	e, err := entry(root, rel)
	if err != nil {
		return nil, fsError(root, p, err)
	}
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: e}), nil
}

func (f files) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	root, src, err := f.resolve(req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	_, dst, err := f.resolve(req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if err := root.MakeDirs(filepath.Dir(dst)); err != nil {
		return nil, fsError(root, req.Msg.GetDestination(), err)
	}
	if err := root.Rename(src, dst); err != nil {
		return nil, fsError(root, req.Msg.GetSource(), err)
	}
	e, err := entry(root, dst)
	if err != nil {
		return nil, fsError(root, req.Msg.GetDestination(), err)
	}
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: e}), nil
}

// maxListEntries bounds one ListDir answer, so a deep listing of a large
// tree cannot hold the server's memory.
const maxListEntries = 100_000

func (f files) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	p := req.Msg.GetPath()
	root, rel, err := f.resolve(p)
	if err != nil {
		return nil, err
	}
	depth := int(max(req.Msg.GetDepth(), 1))
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, fsError(root, p, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is not a directory: %s", p))
	}
	var out []*filesystempb.EntryInfo
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		d, err := root.Open(dir)
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, n := range names {
			if len(out) >= maxListEntries {
				return connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("more than %d entries: list a smaller directory or a lower depth", maxListEntries))
			}
			child := filepath.Join(dir, n)
			e, err := entry(root, child)
			if err != nil {
				continue // gone meanwhile
			}
			out = append(out, e)
			if e.Type == filesystempb.FileType_FILE_TYPE_DIRECTORY && level < depth {
				if err := walk(child, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(rel, 1); err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, fsError(root, p, err)
	}
	return connect.NewResponse(&filesystempb.ListDirResponse{Entries: out}), nil
}

func (f files) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	p := req.Msg.GetPath()
	root, rel, err := f.resolve(p)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		err = root.Clear()
	} else {
		err = root.RemoveAll(rel)
	}
	if err != nil {
		return nil, fsError(root, p, err)
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}

func (f files) WatchDir(context.Context, *connect.Request[filesystempb.WatchDirRequest], *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	return watchRefusal
}

func (f files) CreateWatcher(context.Context, *connect.Request[filesystempb.CreateWatcherRequest]) (*connect.Response[filesystempb.CreateWatcherResponse], error) {
	return nil, watchRefusal
}

func (f files) GetWatcherEvents(context.Context, *connect.Request[filesystempb.GetWatcherEventsRequest]) (*connect.Response[filesystempb.GetWatcherEventsResponse], error) {
	return nil, watchRefusal
}

func (f files) RemoveWatcher(context.Context, *connect.Request[filesystempb.RemoveWatcherRequest]) (*connect.Response[filesystempb.RemoveWatcherResponse], error) {
	return nil, watchRefusal
}

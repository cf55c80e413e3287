package spill

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// metaSuffix names a spill file's sidecar: <name>.log.meta holds its Extent.
const metaSuffix = ".meta"

// maxMetaBytes bounds how much of a sidecar is read; a real one is under
// 100 bytes.
const maxMetaBytes = 4 << 10

// Stream is what WriteStream saves of one output stream: its first bytes,
// its last bytes, or both around an omitted middle.
type Stream struct {
	// Head is the start of the stream; nil when only its end was kept.
	Head []byte
	// Tail is the end of the stream. With a non-empty Head it follows a
	// gap: the stream's bytes between them were not kept. A Tail that
	// continues Head directly belongs in Head.
	Tail []byte
	// TotalBytes is the length of the whole stream; a value below
	// len(Head)+len(Tail) counts as that sum.
	TotalBytes int64
}

// Extent says what a spill file holds of the stream it was written from.
// It is saved beside the file as <name>.meta, one JSON object, when the file
// is written, and read back by Open. The zero Extent means unknown (a file
// without a sidecar, or with one that does not parse).
type Extent struct {
	// StreamBytes is the length of the whole stream.
	StreamBytes int64 `json:"streamBytes"`
	// HeadBytes: the file's first HeadBytes bytes are the stream's first.
	HeadBytes int64 `json:"headBytes"`
	// TailBytes: the file's last TailBytes bytes are the stream's last.
	TailBytes int64 `json:"tailBytes"`
	// HeadLines counts the newlines in the head part, so the omitted
	// middle of a head+tail file follows line HeadLines of the file (or
	// lies inside line HeadLines+1 when the head does not end a line).
	HeadLines int64 `json:"headLines"`
	// HeadEndsLine is true when the head part ends with a newline.
	HeadEndsLine bool `json:"headEndsLine"`
}

// fit cuts st to limit bytes (the start of a head, the end of a tail, at
// most limit/2 of the tail when both are there, each then cut on a line
// boundary) and returns it with its Extent.
func (st Stream) fit(limit int64) (Stream, Extent) {
	total := max(st.TotalBytes, int64(len(st.Head)+len(st.Tail)))
	if int64(len(st.Head)+len(st.Tail)) > limit {
		tailKeep := min(int64(len(st.Tail)), limit)
		if len(st.Head) > 0 {
			tailKeep = min(int64(len(st.Tail)), limit/2)
		}
		headKeep := min(int64(len(st.Head)), limit-tailKeep)
		tailKeep = min(int64(len(st.Tail)), limit-headKeep)
		st.Head = st.Head[:headKeep]
		st.Tail = st.Tail[int64(len(st.Tail))-tailKeep:]
		if len(st.Head) > 0 && len(st.Tail) > 0 {
			// Two parts in one file: cut each on a line boundary where
			// it has one, so no line of the file joins both.
			if i := bytes.LastIndexByte(st.Head, '\n'); i >= 0 {
				st.Head = st.Head[:i+1]
			}
			if i := bytes.IndexByte(st.Tail, '\n'); i >= 0 && i < len(st.Tail)-1 {
				st.Tail = st.Tail[i+1:]
			}
		}
	}
	ext := Extent{StreamBytes: total, HeadBytes: int64(len(st.Head)), TailBytes: int64(len(st.Tail))}
	if ext.HeadBytes+ext.TailBytes == total {
		// Nothing was left out: the file is the stream, one piece.
		ext.HeadBytes, ext.TailBytes = total, 0
	}
	if len(st.Head) > 0 && len(st.Tail) > 0 {
		ext.HeadLines = int64(bytes.Count(st.Head, []byte{'\n'}))
		ext.HeadEndsLine = st.Head[len(st.Head)-1] == '\n'
	}
	return st, ext
}

// Partial reports whether the file holds less than the whole stream.
func (e Extent) Partial() bool { return e.HeadBytes+e.TailBytes < e.StreamBytes }

// Notice is the model-facing sentence on a partial file, naming what it
// holds of the stream; "" when the file is whole or its Extent unknown.
func (e Extent) Notice() string {
	if !e.Partial() {
		return ""
	}
	switch {
	case e.TailBytes == 0:
		return fmt.Sprintf("Partial copy: this file holds the first %d of %d bytes of the output; the rest was not kept.",
			e.HeadBytes, e.StreamBytes)
	case e.HeadBytes == 0:
		return fmt.Sprintf("Partial copy: this file holds the last %d of %d bytes of the output; the start was not kept.",
			e.TailBytes, e.StreamBytes)
	}
	where := fmt.Sprintf("follows line %d", e.HeadLines)
	if !e.HeadEndsLine {
		where = fmt.Sprintf("lies inside line %d", e.HeadLines+1)
	}
	return fmt.Sprintf("Partial copy: this file holds the first %d and the last %d of %d bytes of the output; "+
		"the %d bytes between them were not kept (the gap %s of this file).",
		e.HeadBytes, e.TailBytes, e.StreamBytes, e.StreamBytes-e.HeadBytes-e.TailBytes, where)
}

// writeExtent saves ext beside the spill file rel (relative to the data
// directory), with O_EXCL and mode 0600.
func (s *Store) writeExtent(rel string, ext Extent) (err error) {
	name := rel + metaSuffix
	b, err := json.Marshal(ext)
	if err != nil {
		return fmt.Errorf("spill: extent: %w", err)
	}
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("spill: create %s: %w", filepath.Join(s.dataDir, name), err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("spill: write %s: %w", filepath.Join(s.dataDir, name), cerr)
		}
		if err != nil {
			_ = s.root.Remove(name)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("spill: chmod %s: %w", filepath.Join(s.dataDir, name), err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("spill: write %s: %w", filepath.Join(s.dataDir, name), err)
	}
	return nil
}

// readExtent reads the sidecar of the spill file rel the way Open reads
// files (beneath the data directory, regular files only). A missing or
// malformed sidecar gives the zero Extent: unknown, never an error.
func (s *Store) readExtent(rel string) Extent {
	f, err := s.openFile(rel + metaSuffix)
	if err != nil {
		return Extent{}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes))
	if err != nil {
		return Extent{}
	}
	var ext Extent
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ext); err != nil {
		return Extent{}
	}
	if ext.StreamBytes < 0 || ext.HeadBytes < 0 || ext.TailBytes < 0 || ext.HeadLines < 0 ||
		ext.HeadBytes+ext.TailBytes > ext.StreamBytes {
		return Extent{}
	}
	return ext
}

// Extent returns what WriteStream would keep of st under the store's cap:
// the Extent its sidecar records. A caller that names the file (a marker)
// says from it whether the file is the whole stream.
func (s *Store) Extent(st Stream) Extent {
	_, ext := st.fit(s.maxBytes)
	return ext
}

package journal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// verify reads the whole store file through f before bbolt maps it, and
// returns an error naming the first damage it finds. It checks what bbolt
// itself trusts blindly: bbolt keeps a checksum on its two meta pages only,
// follows every page ID it reads through its memory mapping without a
// bound, and reads a freelist's length from the page. A damaged branch page
// then sends it into an address past the file (a fault that kills the
// process, runtime "unexpected fault address"), into a cycle (a stack
// overflow, also fatal), or a damaged freelist hands a live page out for
// reuse (silent loss at the next commit). bbolt's own Tx.Check walks the
// same pages through the same unguarded mapping, in a goroutine of its own,
// so it cannot be made safe from outside; this walk reads with ReadAt and
// bounds every offset.
//
// The file layout is bbolt's, format version 2 (go.etcd.io/bbolt
// internal/common: page.go, meta.go, bucket.go), little-endian as on every
// platform corral builds for. What it checks:
//
//   - both meta pages: magic, version, checksum, page size, and the file
//     holding the high-water mark they name (either one damaged refuses
//     the store: bbolt would fall back silently to the older one and lose
//     the last commit);
//   - every page reachable from the root bucket: its header names its own
//     ID, its type is branch or leaf, it and its overflow lie below the
//     high-water mark, every element and key lies inside it, its keys are
//     strictly ordered and inside the range its parent gives them, and no
//     page is reached twice;
//   - the freelist: every ID below the high-water mark, none twice, none
//     reachable; and every page is either reachable or free;
//   - the journal's own layout, through check: the names of the buckets,
//     the shape of each session's keys, every entry and batch valid UTF-8
//     framed as a JSON object, and each session's next seq at or past its
//     last entry.
//
// What it cannot see: bytes changed inside a stored value so that it stays
// valid UTF-8 between its braces (bbolt keeps no checksum on data pages);
// Get and List check each value's JSON as they read it.
func verify(f io.ReaderAt, size int64) error {
	return (&walker{f: f}).verify(size)
}

func (w *walker) verify(size int64) error {
	m, err := w.metas(size)
	if err != nil {
		return err
	}
	w.ps, w.hwm = int(m.pageSize), m.pgid
	w.state = make([]pageState, w.hwm)
	w.state[0], w.state[1] = pageUsed, pageUsed
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	var c layout
	if err := w.bucket(m.root, nil, &c); err != nil {
		return err
	}
	for id, s := range w.state {
		if s == pageUnknown {
			return fmt.Errorf("page %d is neither in use nor free", id)
		}
	}
	return nil
}

// Page format constants (bbolt internal/common).
const (
	pageHeader   = 16 // id u64, flags u16, count u16, overflow u32
	elemSize     = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	branchFlag   = 0x01
	leafFlag     = 0x02
	metaFlag     = 0x04
	freelistFlag = 0x10
	bucketFlag   = 0x01 // a leaf element that is a bucket
	bucketHeader = 16   // root u64, sequence u64
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	noFreelist   = ^uint64(0)
	metaSumLen   = 56 // the meta's bytes before its checksum
)

type pageState uint8

const (
	pageUnknown pageState = iota
	pageUsed
	pageFree
)

type meta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

type walker struct {
	f     io.ReaderAt
	ps    int
	hwm   uint64
	state []pageState // per page ID below hwm
	bufs  [][]byte    // spare page buffers
	// onPage, when set (by a test), is told each page read: its ID, its
	// overflow pages and its flags.
	onPage func(id, overflow uint64, flags uint16)
}

var le = binary.LittleEndian

// metas reads and checks both meta pages and returns the newer one.
func (w *walker) metas(size int64) (meta, error) {
	var ms [2]meta
	ps := int64(0)
	for i := range ms {
		b := make([]byte, pageHeader+64)
		if _, err := w.f.ReadAt(b, int64(i)*ps); err != nil {
			return meta{}, fmt.Errorf("meta page %d: %w", i, err)
		}
		id, flags, m := le.Uint64(b), le.Uint16(b[8:]), b[pageHeader:]
		h := fnv.New64a()
		h.Write(m[:metaSumLen])
		switch {
		case le.Uint32(m) != boltMagic:
			return meta{}, fmt.Errorf("meta page %d: not a bbolt meta page", i)
		case le.Uint32(m[4:]) != boltVersion:
			return meta{}, fmt.Errorf("meta page %d: format version %d, want %d", i, le.Uint32(m[4:]), boltVersion)
		case le.Uint64(m[metaSumLen:]) != h.Sum64():
			return meta{}, fmt.Errorf("meta page %d: checksum mismatch", i)
		case flags != metaFlag || id != uint64(i):
			return meta{}, fmt.Errorf("meta page %d: header says page %d, flags %#x", i, id, flags)
		}
		ms[i] = meta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
			pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
		if i == 0 {
			ps = int64(ms[0].pageSize)
			if ps < 1024 || ps > 1<<20 || ps&(ps-1) != 0 {
				return meta{}, fmt.Errorf("meta page 0: page size %d", ps)
			}
		}
	}
	if ms[1].pageSize != ms[0].pageSize {
		return meta{}, fmt.Errorf("the meta pages disagree on the page size (%d, %d)", ms[0].pageSize, ms[1].pageSize)
	}
	m := ms[0]
	if ms[1].txid > m.txid {
		m = ms[1]
	}
	switch {
	case m.pgid < 3 || m.pgid > uint64(size)/uint64(ps):
		return meta{}, fmt.Errorf("the meta page names %d pages, the file holds %d", m.pgid, uint64(size)/uint64(ps))
	case m.root < 2 || m.root >= m.pgid:
		return meta{}, fmt.Errorf("the root bucket's page %d lies outside 2–%d", m.root, m.pgid-1)
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		return meta{}, fmt.Errorf("the freelist page %d lies outside 2–%d", m.freelist, m.pgid-1)
	}
	return m, nil
}

// page reads page id with its overflow, marking them used; the caller
// returns the buffer with put.
func (w *walker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d lies outside 2–%d", id, w.hwm-1)
	}
	b, err := w.read(id, 1)
	if err != nil {
		return nil, err
	}
	if got := le.Uint64(b); got != id {
		w.put(b)
		return nil, fmt.Errorf("page %d: its header says page %d", id, got)
	}
	over := uint64(le.Uint32(b[12:]))
	if over >= w.hwm-id {
		w.put(b)
		return nil, fmt.Errorf("page %d: %d overflow pages run past page %d", id, over, w.hwm-1)
	}
	if w.onPage != nil {
		w.onPage(id, over, le.Uint16(b[8:]))
	}
	for p := id; p <= id+over; p++ {
		if w.state[p] != pageUnknown {
			w.put(b)
			return nil, fmt.Errorf("page %d: reached twice, or reached and free", p)
		}
		w.state[p] = pageUsed
	}
	if over > 0 {
		w.put(b)
		return w.read(id, over+1)
	}
	return b, nil
}

// read returns n pages from page id on, in a buffer the caller returns
// with put. (Reading through a mapping of the file instead cost more CPU
// in BenchmarkVerify100k: a fault per page where this is a pread.)
func (w *walker) read(id, n uint64) ([]byte, error) {
	off, size := int64(id)*int64(w.ps), int64(n)*int64(w.ps)
	b := w.get(int(size))
	if _, err := w.f.ReadAt(b, off); err != nil {
		w.put(b)
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return b, nil
}

func (w *walker) get(n int) []byte {
	for i := len(w.bufs) - 1; i >= 0; i-- {
		if b := w.bufs[i]; cap(b) >= n {
			w.bufs = append(w.bufs[:i], w.bufs[i+1:]...)
			return b[:n]
		}
	}
	return make([]byte, n)
}

func (w *walker) put(b []byte) { w.bufs = append(w.bufs, b) }

// freelist marks the free pages.
func (w *walker) freelist(id uint64) error {
	b, err := w.page(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	defer w.put(b)
	if le.Uint16(b[8:]) != freelistFlag {
		return fmt.Errorf("freelist page %d: flags %#x", id, le.Uint16(b[8:]))
	}
	start, n := pageHeader, uint64(le.Uint16(b[10:]))
	if n == 0xFFFF { // the count overflows into the first element
		n, start = le.Uint64(b[pageHeader:]), pageHeader+8
	}
	if n > w.hwm || uint64(start)+n*8 > uint64(len(b)) {
		return fmt.Errorf("freelist page %d: %d IDs do not fit", id, n)
	}
	for i := range n {
		free := le.Uint64(b[uint64(start)+i*8:])
		if free < 2 || free >= w.hwm || w.state[free] != pageUnknown {
			return fmt.Errorf("freelist page %d: free page %d is out of range, listed twice or in use", id, free)
		}
		w.state[free] = pageFree
	}
	return nil
}

// bucket walks the tree of a bucket whose root is page root; path names
// it (nil: the root bucket).
func (w *walker) bucket(root uint64, path [][]byte, c *layout) error {
	if err := c.open(path); err != nil {
		return err
	}
	if err := w.node(root, nil, nil, path, c); err != nil {
		return err
	}
	return c.close(path)
}

// node checks page id, whose keys lie in [lo, hi) (nil: unbounded), and
// the pages below it.
func (w *walker) node(id uint64, lo, hi []byte, path [][]byte, c *layout) error {
	b, err := w.page(id)
	if err != nil {
		return err
	}
	defer w.put(b)
	switch flags := le.Uint16(b[8:]); flags {
	case leafFlag:
		return w.leaf(b, id, lo, hi, path, c)
	case branchFlag:
	default:
		return fmt.Errorf("page %d: flags %#x where a branch or leaf page belongs", id, flags)
	}
	n := int(le.Uint16(b[10:]))
	if n == 0 || pageHeader+n*elemSize > len(b) {
		return fmt.Errorf("branch page %d: %d elements", id, n)
	}
	keys := make([][]byte, n+1)
	for i := range n {
		e := pageHeader + i*elemSize
		if keys[i], err = span(b, e, uint64(le.Uint32(b[e:])), uint64(le.Uint32(b[e+4:]))); err != nil {
			return fmt.Errorf("branch page %d element %d: %w", id, i, err)
		}
		if err := ordered(keys[i], lo, hi, i > 0 && bytes.Compare(keys[i-1], keys[i]) >= 0); err != nil {
			return fmt.Errorf("branch page %d element %d: %w", id, i, err)
		}
	}
	keys[n] = hi
	for i := range n {
		e := pageHeader + i*elemSize
		if err := w.node(le.Uint64(b[e+8:]), keys[i], keys[i+1], path, c); err != nil {
			return err
		}
	}
	return nil
}

// leaf checks a leaf page's elements (b is the page, or an inline bucket's
// page: id 0) and descends into its buckets.
func (w *walker) leaf(b []byte, id uint64, lo, hi []byte, path [][]byte, c *layout) error {
	if len(b) < pageHeader {
		return fmt.Errorf("leaf page %d: %d bytes", id, len(b))
	}
	n := int(le.Uint16(b[10:]))
	if pageHeader+n*elemSize > len(b) {
		return fmt.Errorf("leaf page %d: %d elements do not fit", id, n)
	}
	var prev []byte
	for i := range n {
		e := pageHeader + i*elemSize
		flags, pos, ksize, vsize := le.Uint32(b[e:]), uint64(le.Uint32(b[e+4:])), uint64(le.Uint32(b[e+8:])), uint64(le.Uint32(b[e+12:]))
		k, err := span(b, e, pos, ksize)
		if err == nil {
			err = ordered(k, lo, hi, i > 0 && bytes.Compare(prev, k) >= 0)
		}
		v, verr := span(b, e, pos+ksize, vsize)
		if err = cmp.Or(err, verr); err != nil {
			return fmt.Errorf("leaf page %d element %d: %w", id, i, err)
		}
		prev = k
		switch {
		case flags == 0:
			err = c.value(path, k, v)
		case flags != bucketFlag:
			err = fmt.Errorf("flags %#x", flags)
		case id == 0:
			err = errors.New("a bucket inside an inline bucket")
		case len(v) < bucketHeader:
			err = fmt.Errorf("a bucket of %d bytes", len(v))
		default:
			sub := append(path[:len(path):len(path)], bytes.Clone(k))
			err = w.bucketValue(v, sub, c)
		}
		if err != nil {
			return fmt.Errorf("leaf page %d element %d: %w", id, i, err)
		}
	}
	return nil
}

// bucketValue walks a bucket from its value: a root page, or its page
// inline after the header.
func (w *walker) bucketValue(v []byte, path [][]byte, c *layout) error {
	if root := le.Uint64(v); root != 0 {
		return w.bucket(root, path, c)
	}
	in := v[bucketHeader:]
	if len(in) < pageHeader || le.Uint16(in[8:]) != leafFlag {
		return errors.New("an inline bucket that is not a leaf page")
	}
	if err := c.open(path); err != nil {
		return err
	}
	if err := w.leaf(in, 0, nil, nil, path, c); err != nil {
		return err
	}
	return c.close(path)
}

// span returns the n bytes at pos past element offset e.
func span(b []byte, e int, pos, n uint64) ([]byte, error) {
	start := uint64(e) + pos
	if start+n > uint64(len(b)) {
		return nil, errors.New("runs past the page")
	}
	return b[start : start+n], nil
}

func ordered(k, lo, hi []byte, unsorted bool) error {
	switch {
	case unsorted:
		return errors.New("keys out of order")
	case lo != nil && bytes.Compare(k, lo) < 0, hi != nil && bytes.Compare(k, hi) >= 0:
		return errors.New("key outside its parent's range")
	}
	return nil
}

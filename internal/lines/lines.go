package lines

import "bytes"

var nl = []byte{'\n'}

// Count returns the number of newlines in p.
func Count(p []byte) int64 { return int64(bytes.Count(p, nl)) }

// AfterNewline returns the index just past the k-th newline in p (k >= 1),
// or len(p) if p holds fewer. It counts in blocks with bytes.Count so that
// skipping many short lines stays vectorised.
func AfterNewline(p []byte, k int64) int {
	const block = 4096
	off := 0
	for len(p)-off > block {
		c := Count(p[off : off+block])
		if c >= k {
			break
		}
		k -= c
		off += block
	}
	for ; k > 0; k-- {
		i := bytes.IndexByte(p[off:], '\n')
		if i < 0 {
			return len(p)
		}
		off += i + 1
	}
	return off
}

package budget

import (
	"bufio"
	"errors"
	"io"
)

// readBufSize is the buffer of the line reader; lines longer than it are
// read in pieces.
const readBufSize = 64 << 10

// lineReader reads lines while keeping at most max bytes of each, so that a
// single giant line costs bounded memory.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
	n   int64 // bytes consumed
}

// newLineReader returns a lineReader over r keeping limit bytes per line.
func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufSize), max: limit}
}

// next reads the next line. With keep it returns up to max bytes of the line
// without its '\n' (valid until the next call) and whether bytes past max
// were dropped; without keep it only skips the line. nl reports whether the
// line ended with '\n'. At the end of the input it returns io.EOF; a last
// line without a newline is a line.
func (lr *lineReader) next(keep bool) (line []byte, nl, dropped bool, err error) {
	lr.buf = lr.buf[:0]
	read := 0
	for {
		chunk, err := lr.br.ReadSlice('\n')
		read += len(chunk)
		lr.n += int64(len(chunk))
		body := chunk
		if err == nil {
			body, nl = chunk[:len(chunk)-1], true
		}
		if keep {
			take := min(len(body), lr.max-len(lr.buf))
			lr.buf = append(lr.buf, body[:take]...)
			dropped = dropped || take < len(body)
		}
		switch {
		case err == nil:
			return lr.buf, nl, dropped, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if read == 0 {
				return nil, false, false, io.EOF
			}
			return lr.buf, false, dropped, nil
		default:
			return nil, false, false, err
		}
	}
}

// more reports whether any input is left.
func (lr *lineReader) more() bool {
	_, err := lr.br.Peek(1)
	return err == nil
}

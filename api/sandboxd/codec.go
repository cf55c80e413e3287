package sandboxd

import (
	"sync"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Start's output goes out without the copy proto.Marshal would make of
// every chunk: follow reads the rings into a buffer of chunkPool, and the
// server's codec writes a StartResponse's tag and length before that same
// buffer, which grpc-go returns to the pool once it is on the wire. The
// bytes on the wire are exactly those of StartResponse{stdout|stderr: b}.

// chunkPool holds the buffers Start's chunks are read into; it is a
// mem.BufferPool, so grpc-go frees a sent chunk's buffer into it.
type chunkPool struct{ p sync.Pool }

var chunks = &chunkPool{p: sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}}

// Get returns a buffer of n bytes, n at most chunkBytes.
func (c *chunkPool) Get(n int) *[]byte {
	bp := c.p.Get().(*[]byte)
	*bp = (*bp)[:n]
	return bp
}

// Put takes a buffer back.
func (c *chunkPool) Put(bp *[]byte) {
	if cap(*bp) != chunkBytes {
		return
	}
	*bp = (*bp)[:chunkBytes]
	c.p.Put(bp)
}

// rawChunk is a StartResponse carrying one chunk of stdout (field 2) or
// stderr (field 3), already in a wire buffer. Only the server's codec
// marshals it.
type rawChunk struct {
	field protowire.Number
	data  mem.Buffer
}

// startStdoutField and startStderrField are StartResponse's field numbers
// of its stdout and stderr events (process.proto).
const (
	startStdoutField protowire.Number = 2
	startStderrField protowire.Number = 3
)

// codec is grpc-go's proto codec but for rawChunk, whose buffer it sends
// as it is.
type codec struct{ proto encoding.CodecV2 }

func newCodec() codec { return codec{proto: encoding.GetCodecV2(protoenc.Name)} }

func (c codec) Name() string { return protoenc.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*rawChunk)
	if !ok {
		return c.proto.Marshal(v)
	}
	head := protowire.AppendTag(make([]byte, 0, 12), r.field, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(r.data.Len()))
	return mem.BufferSlice{mem.SliceBuffer(head), r.data}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

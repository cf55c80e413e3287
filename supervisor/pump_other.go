//go:build !linux

package supervisor

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// outputs are the read ends of the child's stdout and stderr. Here each is
// drained by a goroutine of its own, waiting in the runtime's poller.
type outputs struct {
	f [2]*os.File
}

// open makes both output pipes. On error nothing is left open.
func (o *outputs) open() (wOut, wErr *os.File, err error) {
	var w [2]*os.File
	for i := range o.f {
		if o.f[i], w[i], err = os.Pipe(); err != nil {
			for _, f := range append(o.f[:i], w[:i]...) {
				f.Close()
			}
			o.f = [2]*os.File{}
			return nil, nil, err
		}
	}
	return w[0], w[1], nil
}

// watch does nothing: there is no pipe-holder scan here.
func (o *outputs) watch(*proc) {}

// close closes the read ends; drainAll received both streams' ends first.
func (o *outputs) close() {
	for _, f := range o.f {
		if f != nil {
			f.Close()
		}
	}
}

// wait starts the drains and waits for the shell's exit, the deadline or
// the abort.
func (p *proc) wait(ctx context.Context) ending {
	deadline := time.Now().Add(p.v.timeout)
	p.pending = len(p.outs.f)
	for i, f := range p.outs.f {
		go p.drain(i, f)
	}
	return p.selectEnd(ctx, deadline)
}

// stopDrains ends the drains still reading.
func (p *proc) stopDrains() {
	for _, f := range p.outs.f {
		f.SetReadDeadline(time.Now())
	}
}

// drain copies stream i until EOF (or until stopDrains ends it), then
// reports EOF to the live side and its end on p.drained. It never stops
// early: past the ceiling the capture only counts.
func (p *proc) drain(i int, f *os.File) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	var err error
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			p.take(i, buf[:n])
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				err = rerr
			}
			break
		}
	}
	p.live.eof(i)
	p.drained <- err
}

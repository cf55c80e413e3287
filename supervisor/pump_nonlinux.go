//go:build !linux

package supervisor

import (
	"context"
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

// useTerminal makes fd, a terminal's master, the stdout stream; there is no
// stderr stream.
func (o *outputs) useTerminal(fd int) { o.f = [2]*os.File{os.NewFile(uintptr(fd), "pty")} }

// watch does nothing: there is no pipe-holder scan here.
func (o *outputs) watch(*proc) {}

// dupReadEnds returns nothing: no waiting watch runs here.
func (o *outputs) dupReadEnds() []*os.File { return nil }

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
	for i, f := range p.outs.f {
		if f == nil {
			continue // a terminal's missing stderr
		}
		p.pending++
		go p.drain(streamIndex(i), f)
	}
	return p.selectEnd(ctx, deadline)
}

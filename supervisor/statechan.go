package supervisor

import (
	"os"
	"time"

	"github.com/corral-sh/corral/internal/shellstate"
)

// stateChannel carries one tracked command's state back: the descriptors the
// child gets (shellstate.FD, where the trap writes; shellstate.ScriptFD, the start-up
// script; shellstate.WitnessFD, a second copy of FD) and how the supervisor
// reads what came back. On Linux it is a size-capped memfd read once the
// tree is gone (statechan_linux.go); elsewhere, and where no memfd can be
// had, a pipe read as it fills (pipeState).
type stateChannel interface {
	// childFiles is cmd.ExtraFiles: index i becomes descriptor 3+i.
	childFiles() []*os.File
	// started is called once the child holds its copies.
	started()
	// collect returns what the shell reported; called once the tree is
	// gone (or the kill gave up).
	collect() stateRead
	// close releases the supervisor's descriptors; idempotent.
	close()
}

// stateRead is what the shell reported.
type stateRead struct {
	data    []byte
	tooLong bool // more than MaxSessionStateBytes came; data is nil
}

// stateWait bounds the wait for the state pipe's EOF once the tree is gone.
// Every holder of its write end was a member of the tree, so EOF is
// immediate unless a process of the tree survived.
const stateWait = 100 * time.Millisecond

// pipeState is the portable state channel: a pipe for the state, drained as
// it fills by a goroutine that keeps at most MaxSessionStateBytes, and a
// pipe holding this command's copy of the script.
type pipeState struct {
	r, w    *os.File // the state pipe
	scriptR *os.File
	data    chan stateRead
}

// pipeChannel is newPipeState as an ungated stateChannel.
func pipeChannel() (stateChannel, bool, error) {
	ch, err := newPipeState()
	if err != nil {
		return nil, false, err
	}
	return ch, false, nil
}

func newPipeState() (*pipeState, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	scriptR, scriptW, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	// The script is far below a pipe's capacity, so the write cannot block.
	_, err = scriptW.WriteString(shellstate.Script(true, false))
	scriptW.Close()
	if err != nil {
		r.Close()
		w.Close()
		scriptR.Close()
		return nil, err
	}
	return &pipeState{r: r, w: w, scriptR: scriptR}, nil
}

func (p *pipeState) childFiles() []*os.File { return shellstate.Files(p.w, p.scriptR) }

func (p *pipeState) started() {
	p.closeChild()
	p.data = make(chan stateRead, 1)
	go func() {
		var r stateRead
		buf := make([]byte, 32<<10)
		for {
			n, err := p.r.Read(buf)
			switch {
			case r.tooLong:
			case len(r.data)+n > MaxSessionStateBytes:
				r.tooLong, r.data = true, nil
			default:
				r.data = append(r.data, buf[:n]...)
			}
			if err != nil {
				p.data <- r
				return
			}
		}
	}()
}

func (p *pipeState) collect() stateRead {
	if p.data == nil {
		return stateRead{}
	}
	p.r.SetReadDeadline(time.Now().Add(stateWait))
	r := <-p.data
	p.data = nil
	return r
}

func (p *pipeState) closeChild() {
	if p.w != nil {
		p.w.Close()
		p.scriptR.Close()
		p.w, p.scriptR = nil, nil
	}
}

func (p *pipeState) close() {
	p.closeChild()
	p.r.Close()
}

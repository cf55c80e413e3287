package supervisor

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux the goroutine that called Run drains the command itself: one
// ppoll(2) over both pipes' read ends, a pidfd of the shell and, when the
// context can be cancelled, an eventfd, until the shell exits, the timeout
// passes or the context is cancelled. The shell's exit then wakes that one
// thread, which goes straight on to the way down. A drain goroutine per pipe
// and an exit watcher in the runtime's poller meant three wake-ups handed
// from thread to thread for the same exit: 4 to 5 % of the run of a `true`
// (BenchmarkOverheadRatio), more than everything else the supervisor adds.
//
// Whatever still holds a pipe after that (a process the shell left behind)
// is drained by one background pump with the same loop until EOF or until
// stopDrains gives up on it.

// maxReadsPerWake bounds the reads of one pipe between two polls, so that a
// flood cannot keep the loop from noticing the exit, the deadline or the
// waker (16 reads are 1 MiB).
const maxReadsPerWake = 16

// pumpEnd says why a pump returned.
type pumpEnd int

const (
	pumpEOF      pumpEnd = iota // every stream reached EOF (only when asked to stop there)
	pumpExited                  // the pidfd turned readable: the shell exited
	pumpWoken                   // the waker was signalled
	pumpDeadline                // the deadline passed
	pumpFailed                  // ppoll itself failed
)

// wait is the first phase of supervise: it drains both pipes on this
// goroutine until the shell exits, the deadline passes or ctx is cancelled,
// and returns which; the streams still open then are handed to the
// background pump.
func (p *proc) wait(ctx context.Context) ending {
	deadline := time.Now().Add(p.v.timeout)
	// Our own pidfd, not the tree's: this loop owns it, so nothing can
	// close it (and let its number be reused) under the poll.
	pidfd, err := unix.PidfdOpen(p.tree.Pid(), 0)
	if err == nil && p.s.noPollLoop {
		unix.Close(pidfd)
		err = errNoPollLoop
	}
	if err == nil && ctx.Done() != nil {
		if err = p.outs.ensureWaker(); err == nil {
			stop := context.AfterFunc(ctx, p.outs.wake.signal)
			defer stop()
		} else {
			unix.Close(pidfd)
		}
	}
	if err != nil {
		p.log.Warn().Err(err).Msg("no descriptor for the poll loop; draining in the background")
		p.handOff()
		return p.selectEnd(ctx, deadline)
	}
	defer unix.Close(pidfd)
	end, ok := p.waitPolled(ctx, pidfd, deadline)
	p.handOff()
	if !ok {
		return p.selectEnd(ctx, deadline)
	}
	return end
}

// waitPolled runs the pump until the shell's end is known; ok is false when
// ppoll failed and the end must be watched otherwise.
func (p *proc) waitPolled(ctx context.Context, pidfd int, deadline time.Time) (ending, bool) {
	for {
		why := p.pump(pidfd, deadline, false)
		switch why {
		case pumpExited:
			// The shell's own descriptors closed before it turned into a
			// zombie (do_exit: exit_files, then exit_notify), so its
			// pipes are at EOF unless something else holds them; read
			// what is ready without waiting.
			p.flush()
			if p.s.closing.Load() {
				return endAborted, true // Close killed it (or it ended as Close began)
			}
			return endExited, true
		case pumpDeadline:
			return endTimedOut, true
		case pumpWoken:
			if ctx.Err() != nil {
				return endAborted, true
			}
		case pumpFailed:
			return 0, false
		}
	}
}

// handOff starts the background pump for the streams not yet at EOF and
// records how many drainAll waits for. The pump reports each of them on
// p.drained: nil at EOF, the read error, or errStopped.
func (p *proc) handOff() {
	o := &p.outs
	var open []int
	for i := range o.eof {
		if !o.eof[i] {
			open = append(open, i)
		}
	}
	p.pending = len(open)
	if len(open) == 0 {
		return
	}
	if err := o.ensureWaker(); err != nil {
		// stopDrains then reaches the pump through its flag alone.
		p.log.Warn().Err(err).Msg("no waker for the background drain")
	}
	o.pumped = make(chan struct{})
	go func() {
		defer close(o.pumped)
		p.drainRest()
		for _, i := range open {
			err := o.err[i]
			if !o.eof[i] {
				err = errStopped
				o.eof[i] = true
				p.live.eof(i)
			}
			p.drained <- err
		}
	}()
}

// drainRest is the background pump: it drains until every stream reached
// EOF or stopDrains asked it to stop. Without a waker it looks at the stop
// flag every 100 ms.
func (p *proc) drainRest() {
	o := &p.outs
	for !o.stop.Load() {
		var deadline time.Time
		if o.wake == nil {
			deadline = time.Now().Add(100 * time.Millisecond)
		}
		switch p.pump(-1, deadline, true) {
		case pumpEOF:
			return
		case pumpFailed:
			if o.wake == nil {
				return // neither poll nor wake works: give up, as stopDrains would
			}
			time.Sleep(10 * time.Millisecond) // ppoll failed; retry rather than spin; not synchronisation
		}
	}
}

// stopDrains makes the background pump give up on the streams still open.
func (p *proc) stopDrains() {
	p.outs.stop.Store(true)
	if p.outs.wake != nil {
		p.outs.wake.signal()
	}
}

// pump drains the open streams with one ppoll over them, exitFD (when ≥ 0)
// and the waker (when there is one), until exitFD turns readable, the waker
// is signalled, the deadline passes (zero: none), or, with atEOF, every
// stream has reached EOF.
func (p *proc) pump(exitFD int, deadline time.Time, atEOF bool) pumpEnd {
	o := &p.outs
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	var set [4]unix.PollFd
	var stream [2]int // stream index of set[k], for the pipes
	for {
		fds := set[:0]
		for i := range o.fd {
			if !o.eof[i] {
				stream[len(fds)] = i
				fds = append(fds, unix.PollFd{Fd: int32(o.fd[i]), Events: unix.POLLIN})
			}
		}
		pipes := len(fds)
		if pipes == 0 && atEOF {
			return pumpEOF
		}
		if exitFD >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(exitFD), Events: unix.POLLIN})
		}
		if o.wake != nil {
			fds = append(fds, unix.PollFd{Fd: int32(o.wake.fd), Events: unix.POLLIN})
		}
		var ts *unix.Timespec
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return pumpDeadline
			}
			t := unix.NsecToTimespec(d.Nanoseconds())
			ts = &t
		}
		n, err := unix.Ppoll(fds, ts, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.log.Warn().Err(err).Msg("ppoll")
			return pumpFailed
		}
		if n == 0 {
			continue // the timeout: the deadline check above returns
		}
		for k := range pipes {
			if fds[k].Revents != 0 {
				p.readReady(stream[k], *bp)
			}
		}
		end := pumpEnd(-1)
		for _, f := range fds[pipes:] {
			switch {
			case f.Revents == 0:
			case int(f.Fd) == exitFD:
				end = pumpExited
			default:
				o.wake.reset()
				if end < 0 {
					end = pumpWoken
				}
			}
		}
		if end >= 0 {
			return end
		}
	}
}

// flush reads what the open streams have ready now, without waiting, a few
// rounds at most; a stream that reaches EOF is done.
func (p *proc) flush() {
	o := &p.outs
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	for range 4 {
		var set [2]unix.PollFd
		var stream [2]int
		fds := set[:0]
		for i := range o.fd {
			if !o.eof[i] {
				stream[len(fds)] = i
				fds = append(fds, unix.PollFd{Fd: int32(o.fd[i]), Events: unix.POLLIN})
			}
		}
		if len(fds) == 0 {
			return
		}
		n, err := unix.Poll(fds, 0)
		if err != nil || n == 0 {
			return // EINTR included: the background pump reads the rest
		}
		for k := range fds {
			if fds[k].Revents != 0 {
				p.readReady(stream[k], *bp)
			}
		}
	}
}

// readReady reads stream i, which poll reported ready, until it would block,
// reaches EOF, fails, or maxReadsPerWake reads were full.
func (p *proc) readReady(i int, buf []byte) {
	o := &p.outs
	for range maxReadsPerWake {
		n, err := unix.Read(o.fd[i], buf)
		switch {
		case n > 0:
			p.take(i, buf[:n])
			if n < len(buf) {
				return
			}
		case err == nil: // n == 0: EOF, no writer is left
			o.eof[i] = true
			p.live.eof(i)
			return
		case errors.Is(err, unix.EAGAIN):
			return
		case errors.Is(err, unix.EINTR):
		default:
			o.err[i] = err
			o.eof[i] = true
			p.live.eof(i)
			return
		}
	}
}

package supervisor

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux the goroutine that called Run drains the command itself at first:
// one ppoll(2) over both pipes' read ends, a pidfd of the shell and, when the
// context can be cancelled, an eventfd. A short command's exit then wakes
// that one thread, which goes straight on to the way down. A drain goroutine
// per pipe and an exit watcher in the runtime's poller meant three wake-ups
// handed from thread to thread for the same exit, which cost more of a
// `true` than everything else the supervisor adds (BenchmarkOverheadRatio;
// docs/performance.md).
//
// A blocking system call has its own price in the Go runtime, though: every
// ppoll that sleeps lets sysmon take the goroutine's P away, and getting one
// back costs futex wake-ups. Paid once per command, that is nothing; paid
// once per 64 KiB of a flood, it cost a large share of the throughput
// against goroutines in the poller (BenchmarkDrain; docs/performance.md). So a
// command that proves busy (busyWakeups polls, or busyBytes drained) leaves
// the loop: its streams go to drain goroutines in the runtime's poller,
// whose idle threads spin before they sleep, and its end is watched there
// (selectEnd). So do the streams still open when the loop ends, which only
// processes the shell left behind can hold.
const (
	busyWakeups = 64
	busyBytes   = 256 << 10
)

// maxReadsPerWake bounds the reads of one pipe between two polls, so that a
// stream that never runs dry cannot keep the loop from noticing the exit,
// the deadline or the waker (16 reads are 1 MiB).
const maxReadsPerWake = 16

// pollEnd says why the poll loop returned.
type pollEnd int

const (
	pollExited   pollEnd = iota // the pidfd turned readable: the shell exited
	pollWoken                   // the waker was signalled
	pollDeadline                // the deadline passed
	pollBusy                    // the command is busy: leave it to the poller
	pollFailed                  // ppoll itself failed
)

// wait is the first phase of supervise: it drains both pipes on this
// goroutine until the shell exits, the deadline passes or ctx is cancelled,
// and returns which. Streams still open then, and every stream of a busy
// command, are handed to drain goroutines (handOff).
func (p *proc) wait(ctx context.Context) ending {
	deadline := time.Now().Add(p.v.timeout)
	// Our own descriptor, not the tree's: this loop owns it, so nothing
	// can close it (and let its number be reused) under the poll. It is a
	// pidfd of the shell, or the status pipe of its reaper.
	pidfd, err := p.tree.ExitFD()
	if err == nil && p.s.noPollLoop {
		unix.Close(pidfd)
		err = errNoPollLoop
	}
	var wake *waker
	if err == nil && ctx.Done() != nil {
		if wake, err = newWaker(); err == nil {
			defer wake.close()
			defer context.AfterFunc(ctx, wake.signal)() // stops the AfterFunc before the close
		} else {
			unix.Close(pidfd)
		}
	}
	if err != nil {
		p.log.Warn().Err(err).Msg("no descriptor for the poll loop; draining in goroutines")
		p.handOff()
		return p.selectEnd(ctx, deadline)
	}
	defer unix.Close(pidfd)
	end, known := p.waitPolled(ctx, pidfd, wake, deadline)
	p.handOff()
	if !known {
		return p.selectEnd(ctx, deadline)
	}
	return end
}

// waitPolled runs the poll loop until the shell's end is known, or until
// the end must be watched otherwise (known false: the command is busy, or
// ppoll failed).
func (p *proc) waitPolled(ctx context.Context, pidfd int, wake *waker, deadline time.Time) (end ending, known bool) {
	for {
		switch p.pump(pidfd, wake, deadline) {
		case pollExited:
			// The shell's own descriptors closed before it turned into a
			// zombie (do_exit: exit_files, then exit_notify), so its
			// pipes are at EOF unless something else holds them; read
			// what is ready without waiting.
			p.flush()
			if p.s.closing.Load() {
				return endAborted, true // Close killed it (or it ended as Close began)
			}
			return endExited, true
		case pollDeadline:
			return endTimedOut, true
		case pollWoken:
			if ctx.Err() != nil {
				return endAborted, true
			}
		case pollBusy, pollFailed:
			return 0, false
		}
	}
}

// handOff starts a drain goroutine for every stream not yet at EOF, and
// records how many drainAll waits for.
func (p *proc) handOff() {
	for i := range p.outs.fd {
		if !p.outs.eof[i] {
			p.pending++
			go p.drain(streamIndex(i), p.outs.file(streamIndex(i)))
		}
	}
}

// pump drains the open streams with one ppoll over them, exitFD and the
// waker (when there is one), until exitFD turns readable, the waker is
// signalled, the deadline passes, or the command proves busy.
func (p *proc) pump(exitFD int, wake *waker, deadline time.Time) pollEnd {
	o := &p.outs
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	var set [4]unix.PollFd
	var which [2]streamIndex // the stream of set[k], for the pipes
	for {
		if o.wakeups >= busyWakeups || o.bytes >= busyBytes {
			return pollBusy
		}
		fds := o.pollOpen(set[:0], &which)
		pipes := len(fds)
		fds = append(fds, unix.PollFd{Fd: int32(exitFD), Events: unix.POLLIN})
		if wake != nil {
			fds = append(fds, unix.PollFd{Fd: int32(wake.fd), Events: unix.POLLIN})
		}
		d := time.Until(deadline)
		if d <= 0 {
			return pollDeadline
		}
		ts := unix.NsecToTimespec(d.Nanoseconds())
		n, err := unix.Ppoll(fds, &ts, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.log.Warn().Err(err).Msg("ppoll")
			return pollFailed
		}
		if n == 0 {
			continue // the timeout: the deadline check above returns
		}
		o.wakeups++
		for k := range pipes {
			if fds[k].Revents != 0 {
				p.readReady(which[k], *bp)
			}
		}
		end := pollEnd(-1)
		for _, f := range fds[pipes:] {
			switch {
			case f.Revents == 0:
			case int(f.Fd) == exitFD:
				end = pollExited
			default:
				wake.reset()
				if end < 0 {
					end = pollWoken
				}
			}
		}
		if end >= 0 {
			return end
		}
	}
}

// pollOpen appends a POLLIN entry for every stream not at EOF to fds and
// records in which the stream of each entry.
func (o *outputs) pollOpen(fds []unix.PollFd, which *[2]streamIndex) []unix.PollFd {
	for i := range o.fd {
		if !o.eof[i] {
			which[len(fds)] = streamIndex(i)
			fds = append(fds, unix.PollFd{Fd: int32(o.fd[i]), Events: unix.POLLIN})
		}
	}
	return fds
}

// flush reads what the open streams have ready now, without waiting, a few
// rounds at most; a stream that reaches EOF is done.
func (p *proc) flush() {
	o := &p.outs
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	for range 4 {
		var set [2]unix.PollFd
		var which [2]streamIndex
		fds := o.pollOpen(set[:0], &which)
		if len(fds) == 0 {
			return
		}
		n, err := unix.Poll(fds, 0)
		if err != nil || n == 0 {
			return // EINTR included: the drain goroutines read the rest
		}
		for k := range fds {
			if fds[k].Revents != 0 {
				p.readReady(which[k], *bp)
			}
		}
	}
}

// readReady reads stream i, which poll reported ready, until it would block,
// reaches EOF, fails, or maxReadsPerWake reads were full.
func (p *proc) readReady(i streamIndex, buf []byte) {
	o := &p.outs
	if testHookBeforeRead != nil {
		testHookBeforeRead(p, i)
	}
	for range maxReadsPerWake {
		n, err := unix.Read(o.fd[i], buf)
		switch {
		case n > 0:
			o.bytes += int64(n)
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
		case p.term != nil && ptyEOF(err): // the terminal's hang-up: no writer is left
			o.eof[i] = true
			p.live.eof(i)
			return
		default:
			p.log.Warn().Err(err).Stringer("stream", i).Msg("drain")
			o.eof[i] = true
			p.live.eof(i)
			return
		}
	}
}

// errNoPollLoop is the reason wait gives when a test turned the poll loop off.
var errNoPollLoop = errors.New("supervisor: poll loop turned off")

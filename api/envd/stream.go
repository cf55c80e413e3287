package envd

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/corral-sh/corral/api/envd/processpb"
	"github.com/corral-sh/corral/supervisor"
)

// chunkBytes is the most one data event carries.
const chunkBytes = 256 << 10

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}

var streamNames = [2]string{"stdout", "stderr"}

// follow sends js's output from the start of what the rings hold, as data
// events, a keepalive after every interval without an event, and the end
// event once the job ended and both streams were read to their end. It
// returns nil after the end event, or the error that stopped it (the
// stream's context ending, a failed send). What the rings dropped before
// this reader got to it is counted and said in the stream where the gap is.
func (s *Service) follow(ctx context.Context, js *supervisor.JobStream, interval time.Duration, send func(*processpb.ProcessEvent) error) error {
	bp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(bp)
	buf := *bp
	var off [2]int64
	keep := time.NewTimer(interval)
	defer keep.Stop()
	for {
		changed := js.Changed()
		res, ended := js.Result() // before reading: an ended job's rings are complete
		sent := false
		for i := range 2 {
			n, start := js.Read(i, buf, off[i])
			if skipped := start - off[i]; skipped > 0 {
				note := fmt.Sprintf("\n[corral: %d bytes of %s were skipped here: this client read more slowly than the "+
					"command wrote, and corral keeps only the end of each stream (its capture ceiling, 512 KiB by default).]\n",
					skipped, streamNames[i])
				if err := send(dataEvent(i, js.TTY(), []byte(note))); err != nil {
					return toConnect(err)
				}
			}
			off[i] = start + int64(n)
			if n > 0 {
				if err := send(dataEvent(i, js.TTY(), buf[:n])); err != nil {
					return toConnect(err)
				}
				sent = true
			}
		}
		if sent {
			keep.Reset(interval)
			continue
		}
		if ended {
			if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: endEvent(res)}}); err != nil {
				return toConnect(err)
			}
			return nil
		}
		select {
		case <-changed:
		case <-keep.C:
			if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Keepalive{
				Keepalive: &processpb.ProcessEvent_KeepAlive{}}}); err != nil {
				return toConnect(err)
			}
			keep.Reset(interval)
		case <-ctx.Done():
			return toConnect(ctx.Err())
		}
	}
}

func startEvent(pid uint32) *processpb.ProcessEvent {
	return &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: pid}}}
}

// dataEvent is output of stream i; a process on a terminal has one stream,
// sent as pty data, as envd does.
func dataEvent(i int, tty bool, b []byte) *processpb.ProcessEvent {
	d := &processpb.ProcessEvent_DataEvent{}
	if tty {
		d.Output = &processpb.ProcessEvent_DataEvent_Pty{Pty: b}
	} else if i == 0 {
		d.Output = &processpb.ProcessEvent_DataEvent_Stdout{Stdout: b}
	} else {
		d.Output = &processpb.ProcessEvent_DataEvent_Stderr{Stderr: b}
	}
	return &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: d}}
}

// signalWords is how Go's os.ProcessState names a signal death in envd's
// status ("signal: killed"); others keep their SIG name.
var signalWords = map[string]string{
	"SIGKILL": "killed", "SIGTERM": "terminated", "SIGINT": "interrupt", "SIGHUP": "hangup",
	"SIGQUIT": "quit", "SIGABRT": "aborted", "SIGSEGV": "segmentation fault", "SIGPIPE": "broken pipe",
	"SIGBUS": "bus error", "SIGFPE": "floating point exception", "SIGILL": "illegal instruction",
}

// endEvent says how the process ended as envd does: an exit by itself is
// exited with its code, status "exit status N" and, unless 0, the same as
// error; a signal death is exit_code -1, exited false, status
// "signal: killed". A timeout or an abort says so in error.
func endEvent(res supervisor.Result) *processpb.ProcessEvent_EndEvent {
	if res.ExitCode != nil {
		end := &processpb.ProcessEvent_EndEvent{ExitCode: int32(*res.ExitCode), Exited: true,
			Status: fmt.Sprintf("exit status %d", *res.ExitCode)}
		if *res.ExitCode != 0 {
			end.Error = &end.Status
		}
		return end
	}
	word, ok := signalWords[res.Signal]
	if !ok {
		word = res.Signal
		if word == "" {
			word = "killed"
		}
	}
	status := "signal: " + word
	msg := status
	switch {
	case res.TimedOut:
		msg += " (corral: the process's timeout passed; its whole tree was killed)"
	case res.Aborted:
		msg += " (corral: its whole tree was killed)"
	}
	return &processpb.ProcessEvent_EndEvent{ExitCode: -1, Exited: false, Status: status, Error: &msg}
}

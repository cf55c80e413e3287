package supervisor

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/internal/shellstate"
)

// On Linux the state goes to a memfd instead of a pipe, read once the tree
// is gone: no reader goroutine woken by each of the trap's writes, which
// cost more than the rest of the tracking together
// (BenchmarkSessionStateRatio). The memfd is sized to memStateSize and then
// sealed against growing, so a command that writes without end to
// descriptor 3 fills at most that much (charged to its own cgroup, like its
// other memory) and then gets EPERM. The writers share the supervisor's open
// file description, so its offset is where the last write ended.
//
// The script is one memfd per Supervisor, sealed against every change, so
// no command can alter what another reads; bash opens it as /dev/fd/4,
// which on Linux opens the file anew (proc_fd_link), with its own offset.

// memStateSize leaves room past MaxSessionStateBytes, so that a state over
// the limit is seen to be over it even though the writes that would cross
// the end fail (shmem_write_begin refuses a sealed file's growth a page at
// a time).
const memStateSize = MaxSessionStateBytes + 64<<10

type memfdState struct {
	f      *os.File
	script *os.File // the Supervisor's; not closed here
}

// openStateChannel returns a memfd channel, or the pipe channel where no
// memfd can be had (a kernel before 3.17, a seccomp filter). gated asks
// for the script with the start gate; the pipe channel has none, and says
// so in its gated result.
func (s *Supervisor) openStateChannel(gated bool) (ch stateChannel, isGated bool, err error) {
	script, err := s.sessions.sharedScript(true, gated)
	if err != nil || s.statePipe {
		return pipeChannel()
	}
	f, err := newMemfd("corral-state", memStateSize, unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
	if err != nil {
		return pipeChannel()
	}
	return &memfdState{f: f, script: script}, gated, nil
}

// newMemfd makes a memfd of the given size and seals it.
func newMemfd(name string, size int64, seals int) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal %s: %w", name, err)
	}
	return f, nil
}

// sharedScript makes the Supervisor's memfd of one shellstate.Script variant
// once, sealed against every change.
func (t *sessionTable) sharedScript(tracked, gated bool) (*os.File, error) {
	sc := &t.scripts[scriptIndex(tracked, gated)]
	sc.once.Do(func() {
		text := shellstate.Script(tracked, gated)
		f, err := newMemfd("corral-state-script", int64(len(text)), 0)
		if err == nil {
			if _, err = f.WriteAt([]byte(text), 0); err == nil {
				_, err = unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS,
					unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL)
			}
			if err != nil {
				f.Close()
				f = nil
			}
		}
		sc.f, sc.err = f, err
	})
	return sc.f, sc.err
}

func (m *memfdState) childFiles() []*os.File { return shellstate.Files(m.f, m.script) }

func (m *memfdState) started() {}

func (m *memfdState) collect() stateRead {
	end, err := m.f.Seek(0, io.SeekCurrent)
	switch {
	case err != nil:
		return stateRead{}
	case end > MaxSessionStateBytes:
		return stateRead{tooLong: true}
	}
	data := make([]byte, end)
	n, _ := m.f.ReadAt(data, 0)
	return stateRead{data: data[:n]}
}

func (m *memfdState) close() { m.f.Close() }

//go:build unix

package runcmd

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"

	"github.com/corral-sh/corral/supervisor"
)

// terminalSize is the size of corral's own terminal (stdout's, else
// stdin's), or nil (the defaults) when neither is one.
func (m *Main) terminalSize() *supervisor.TTYSize {
	for _, f := range []any{m.Stdout, m.Stdin} {
		if f, ok := f.(*os.File); ok {
			if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
				return &supervisor.TTYSize{Cols: int(ws.Col), Rows: int(ws.Row)}
			}
		}
	}
	return &supervisor.TTYSize{}
}

// rawInput puts corral's stdin in raw mode when it is a terminal (as
// cfmakeraw(3) does), and returns what restores it.
func (m *Main) rawInput() (restore func()) {
	f, ok := m.Stdin.(*os.File)
	if !ok {
		return func() {}
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return func() {}
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if unix.IoctlSetTermios(fd, ioctlSetTermios, &raw) != nil {
		return func() {}
	}
	return func() { unix.IoctlSetTermios(fd, ioctlSetTermios, old) }
}

// followResize resizes the job's terminal when corral's own is resized
// (SIGWINCH), until the returned stop is called.
func (m *Main) followResize(sup *supervisor.Supervisor, id string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGWINCH)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-ch:
				if sz := m.terminalSize(); sz.Cols > 0 {
					sup.Jobs().Resize(id, *sz)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
		<-ended
	}
}

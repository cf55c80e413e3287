package supervisor

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// After a burst of commands the Go runtime keeps the heap it grew: the heap
// may reach twice its live data before a collection (GOGC=100), and an idle
// process collects only every two minutes, returning its free pages a little
// at a time. With Config.ReturnIdleMemory, once no command has been running
// for idleReturnDelay, the supervisor collects and returns the free memory at
// once (debug.FreeOSMemory), at most once per idleReturnEvery; a server's
// RSS then falls back to what it holds: the exited jobs' output within
// MaxRetainedBytes, the sessions, the tables (TestFigureRetainedJobsRSS).
const (
	idleReturnDelay = time.Second
	idleReturnEvery = 10 * time.Second
)

// idleMemory schedules the return of memory when the supervisor goes idle.
type idleMemory struct {
	mu     sync.Mutex
	timer  *time.Timer // nil until the first idle moment
	last   time.Time   // when memory was last returned
	closed bool
}

// wentIdle is called when the last running command ended.
func (s *Supervisor) wentIdle() {
	m := &s.idleMem
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	wait := max(idleReturnDelay, time.Until(m.last.Add(idleReturnEvery)))
	if m.timer == nil {
		m.timer = time.AfterFunc(wait, s.returnIdleMemory)
	} else {
		m.timer.Reset(wait)
	}
}

// returnIdleMemory returns the heap's free memory to the system unless a
// command started meanwhile (its end schedules the next try).
func (s *Supervisor) returnIdleMemory() {
	if s.running.Load() != 0 {
		return
	}
	m := &s.idleMem
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.last = time.Now()
	m.mu.Unlock()
	// A sync.Pool keeps what it held before a collection one more cycle
	// (its victim cache): the drains' 64 KiB read buffers, encoding/json's
	// buffers grown to the size of a Result. The first collection moves
	// them there, the one FreeOSMemory runs frees them.
	runtime.GC()
	debug.FreeOSMemory()
}

// stop ends the scheduling; Close calls it.
func (m *idleMemory) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
}

package journal

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"
)

// A storage fault takes the Journal offline: bbolt panicking on a damaged
// page (its assertions, or a slice past a garbled length), a fault on its
// memory mapping (a page past the end of the file, a hole a full tmpfs
// cannot fill: SIGBUS or SIGSEGV, which debug.SetPanicOnFault turns into a
// panic on the calling goroutine, where it would otherwise kill the
// process), a commit that fails to write or sync (EIO, ENOSPC), or a stored
// value that is not the JSON it was written as. From then on every call
// fails at once with an error wrapping ErrOffline that names the first
// fault, and nothing touches bbolt again: a panic may have left it
// mid-transaction. The next Open checks the whole file (verify) and refuses
// it when it is damaged.

// ErrOffline wraps every error of a Journal that a storage fault took
// offline; [Journal.Offline] returns it.
var ErrOffline = errors.New("journal: offline after a storage fault")

// errDamagedValue marks a stored value that does not decode: a storage
// fault, not a caller's mistake.
var errDamagedValue = errors.New("a stored value is damaged")

// closeWait bounds Close's wait for bbolt after a fault.
const closeWait = 2 * time.Second

type offlineError struct {
	path  string
	fault error
}

func (e *offlineError) Error() string {
	return fmt.Sprintf("journal: offline after a storage fault in %s (%v); nothing more is journaled until corral restarts, "+
		"and the restart checks the file", e.path, e.fault)
}

func (e *offlineError) Is(target error) bool { return target == ErrOffline }
func (e *offlineError) Unwrap() error        { return e.fault }

// Offline returns nil while the Journal works, and once a storage fault
// took it offline an error wrapping ErrOffline that names the fault.
func (j *Journal) Offline() error {
	if e := j.fault.Load(); e != nil {
		return e
	}
	return nil
}

// goOffline records the first fault and returns the error every call gets
// from now on.
func (j *Journal) goOffline(fault error) error {
	j.fault.CompareAndSwap(nil, &offlineError{path: j.path, fault: fault})
	return j.fault.Load()
}

// guard is deferred at each boundary into bbolt, after
// debug.SetPanicOnFault(true): a panic takes the Journal offline and
// becomes *err.
func (j *Journal) guard(err *error) {
	if r := recover(); r != nil {
		*err = j.goOffline(fmt.Errorf("bbolt panicked: %v", r))
	}
}

// view runs fn in a read-only transaction. An error of fn is returned as
// it is, unless it marks a damaged value; any other failure is a storage
// fault.
func (j *Journal) view(fn func(tx *bolt.Tx) error) (err error) {
	if e := j.Offline(); e != nil {
		return e
	}
	defer j.guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	failed := false
	err = j.db.View(func(tx *bolt.Tx) error {
		err := fn(tx)
		failed = err != nil
		return err
	})
	return j.classify(err, failed)
}

// tx runs fns in one read-write transaction and commits it, as view does.
func (j *Journal) tx(fns ...func(tx *bolt.Tx) error) (err error) {
	if e := j.Offline(); e != nil {
		return e
	}
	defer j.guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	failed := false
	err = j.db.Update(func(tx *bolt.Tx) error {
		for _, fn := range fns {
			if err := fn(tx); err != nil {
				failed = true
				return err
			}
		}
		return nil
	})
	return j.classify(err, failed)
}

func (j *Journal) classify(err error, failed bool) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bolterr.ErrDatabaseNotOpen):
		return ErrClosed
	case failed && !errors.Is(err, errDamagedValue):
		return err
	}
	return j.goOffline(err)
}

// closeDB closes bbolt; after a fault, within closeWait: a panic may have
// left it holding its writer lock, and its Close would wait for that
// forever. The goroutine then stays blocked, and the file open, until the
// process exits.
func (j *Journal) closeDB() error {
	if j.Offline() == nil {
		return j.db.Close()
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("journal: close %s: bbolt panicked: %v", j.path, r)
			}
		}()
		done <- j.db.Close()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(closeWait):
		return fmt.Errorf("journal: close %s: bbolt did not let go of the file %v after the fault; it stays open until the process exits", j.path, closeWait)
	}
}

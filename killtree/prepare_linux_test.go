package killtree

import (
	"errors"
	"sync"
	"testing"
)

// fakeC is a containment that records its destruction.
type fakeC struct {
	pgroupC
	mu        sync.Mutex
	destroyed int
	err       error // what destroy returns
}

func (f *fakeC) destroy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroyed++
	return f.err
}

func (f *fakeC) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.destroyed
}

func TestPreparer(t *testing.T) {
	var mu sync.Mutex
	var made []*fakeC
	p := newPreparer(func(id string) (containment, error) {
		c := &fakeC{}
		mu.Lock()
		made = append(made, c)
		mu.Unlock()
		return c, nil
	}, false)
	ids := map[string]bool{}
	for range 5 {
		p.idle() // a containment is ready now
		sp := p.take()
		if sp == nil {
			t.Fatal("nothing ready after idle")
		}
		if ids[sp.id] {
			t.Fatalf("id %s handed out twice", sp.id)
		}
		ids[sp.id] = true
		if p.take() != nil {
			t.Fatal("a second containment was ready before a restock")
		}
		p.restock()
	}
	p.idle()
	p.close()
	mu.Lock()
	defer mu.Unlock()
	if len(made) != 6 {
		t.Fatalf("made %d containments, want 5 taken and 1 ready", len(made))
	}
	for i, c := range made {
		want := 0
		if i == len(made)-1 {
			want = 1 // the one still held at close
		}
		if c.destroyed != want {
			t.Errorf("containment %d destroyed %d times, want %d", i, c.destroyed, want)
		}
	}
}

// TestPreparerSingle: a single preparer (a sole-tree Manager) makes the
// first containment only; once it was taken, restocks make none, and the
// removals it is asked for still happen.
func TestPreparerSingle(t *testing.T) {
	var mu sync.Mutex
	made := 0
	p := newPreparer(func(id string) (containment, error) {
		mu.Lock()
		made++
		mu.Unlock()
		return &fakeC{}, nil
	}, true)
	p.idle()
	sp := p.take()
	if sp == nil {
		t.Fatal("nothing ready after idle")
	}
	p.restock() // what Start does after starting
	p.idle()
	if p.take() != nil {
		t.Error("a single preparer made a second containment")
	}
	if err := p.remove(sp.c); err != nil { // what Tree.Close does
		t.Fatal(err)
	}
	p.idle()
	if n := sp.c.(*fakeC).count(); n != 1 {
		t.Errorf("the taken containment was destroyed %d times, want 1", n)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if made != 1 {
		t.Errorf("made %d containments, want 1", made)
	}
}

// TestPreparerFailure: a preparer that cannot make a containment offers
// none (Start then makes its own and reports why), does not spin, tries
// again at the next restock, and still closes.
func TestPreparerFailure(t *testing.T) {
	var mu sync.Mutex
	calls, fail := 0, true
	p := newPreparer(func(id string) (containment, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if fail {
			return nil, errors.New("mkdir: no space left on device")
		}
		return &fakeC{}, nil
	}, false)
	defer p.close()
	p.idle()
	p.idle()
	mu.Lock()
	if calls != 1 {
		t.Errorf("newC called %d times before any restock, want 1: the preparer spins on a failure", calls)
	}
	fail = false
	mu.Unlock()
	if p.take() != nil {
		t.Error("take offered a containment the preparer failed to make")
	}
	p.restock() // what Start does after starting
	p.idle()
	if p.take() == nil {
		t.Error("nothing ready after the preparation works again")
	}
}

// TestPreparerRemovals: queued removals happen in the background before
// idle returns, a failure is reported by close, and a removal queued after
// close happens at once.
func TestPreparerRemovals(t *testing.T) {
	p := newPreparer(func(id string) (containment, error) { return &fakeC{}, nil }, false)
	ok, bad := &fakeC{}, &fakeC{err: errors.New("rmdir: device or resource busy")}
	if err := p.remove(ok); err != nil {
		t.Fatal(err)
	}
	if err := p.remove(bad); err != nil {
		t.Fatal(err)
	}
	p.idle()
	if ok.count() != 1 || bad.count() != 1 {
		t.Errorf("destroyed %d and %d times after idle, want 1 and 1", ok.count(), bad.count())
	}
	if err := p.close(); err == nil || err.Error() != bad.err.Error() {
		t.Errorf("close = %v, want the failed removal", err)
	}
	late := &fakeC{}
	if err := p.remove(late); err != nil || late.count() != 1 {
		t.Errorf("remove after close: %v, destroyed %d times; want at once", err, late.count())
	}
}

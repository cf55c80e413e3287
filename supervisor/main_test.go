package supervisor

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/corral-sh/corral/internal/proctest"
)

func TestMain(m *testing.M) {
	if os.Getenv(proctest.HelperEnv) != "" {
		proctest.Main(m)
	}
	// A journal that faulted may leave bbolt holding its writer lock, and
	// journal.Close then leaves the goroutine that waits for it blocked
	// until the process exits, by design (journal/fault.go, closeDB).
	// TestJournalFaultKeepsServing faults one; whether bbolt held the lock
	// when it did is the timing's.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/corral-sh/corral/journal.(*Journal).closeDB.func1"))
}

package killtree

import (
	"os"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	registerHelpers()
	if os.Getenv(proctest.HelperEnv) != "" {
		proctest.Main(m) // runs the helper and exits
	}
	goleak.VerifyTestMain(m)
}

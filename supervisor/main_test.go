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
	goleak.VerifyTestMain(m)
}

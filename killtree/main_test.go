package killtree

import (
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
)

func TestMain(m *testing.M) {
	registerHelpers()
	proctest.Main(m)
}

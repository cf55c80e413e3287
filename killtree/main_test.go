package killtree

import (
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
)

func TestMain(m *testing.M) { proctest.Main(m) }

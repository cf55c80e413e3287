package proctest

import (
	"fmt"
	"os"
)

// registerPlatformHelpers registers the POSIX-only helpers as stubs that exit 2.
func registerPlatformHelpers() {
	for _, name := range []string{"ignoreterm", "killself", "escaper", "bomb"} {
		Register(name, func([]string) int {
			fmt.Fprintf(os.Stderr, "proctest: helper %s is not available on windows\n", name)
			return 2
		})
	}
}

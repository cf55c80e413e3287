package envd

import "context"

// SetStartedHook sets the hook that runs between a Start's job start and
// its start event; nil removes it.
func SetStartedHook(h func(ctx context.Context)) { testHookStarted = h }

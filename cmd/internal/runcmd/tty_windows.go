package runcmd

import "github.com/corral-sh/corral/supervisor"

// terminalSize asks for the defaults: the supervisor refuses a terminal on
// Windows with a clear error.
func (m *Main) terminalSize() *supervisor.TTYSize { return &supervisor.TTYSize{} }

func (m *Main) rawInput() (restore func()) { return func() {} }

func (m *Main) followResize(*supervisor.Supervisor, string) (stop func()) { return func() {} }

package runcmd

// signalNumber: Windows results carry no signal names; a process ended by
// its job object reports like SIGKILL does on Unix.
func signalNumber(string) int { return 9 }

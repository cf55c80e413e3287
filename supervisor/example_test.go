package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/corral-sh/corral/supervisor"
)

// The README's library snippet: run one command and read its Result.
func ExampleSupervisor_Run() {
	dataDir, err := os.MkdirTemp("", "corral-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dataDir)

	sup, err := supervisor.New(supervisor.Config{DataDir: dataDir}) // strongest containment that works here
	if err != nil {
		log.Fatal(err)
	}
	defer sup.Close() // kills whatever is still running

	ctx := context.Background()
	res, err := sup.Run(ctx, supervisor.Request{
		Command: "echo hello; echo oops >&2; exit 3",
		Timeout: 120 * time.Second,            // 0 means 60 s; 1–300 s allowed
		Session: "s-42",                       // names the spill directory, and carries cwd and exported variables
		OnEvent: func(ev supervisor.Event) {}, // live output; never slows the drain
	})
	if errors.Is(err, supervisor.ErrInvalidRequest) {
		log.Fatal(err) // nothing ran
	}
	if err != nil {
		log.Fatal(err) // the shell could not start, or sup was closed (supervisor.ErrClosed)
	}
	fmt.Printf("stdout %q, stderr %q, exit code %d, timed out %v\n", res.Stdout, res.Stderr, *res.ExitCode, res.TimedOut)
	// Output: stdout "hello\n", stderr "oops\n", exit code 3, timed out false
}

// A background job: start it, read its output with a cursor, wait for it.
func ExampleJobs_Start() {
	sup, err := supervisor.New(supervisor.Config{}) // no DataDir: no spill files
	if err != nil {
		log.Fatal(err)
	}
	defer sup.Close()

	ctx := context.Background()
	st, err := sup.Jobs().Start(supervisor.JobRequest{
		Request:  supervisor.Request{Command: "for i in 1 2 3; do echo line $i; done"},
		Lifetime: time.Minute, // killed with its whole tree after this; 0 means 30 min
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := sup.Jobs().Wait(ctx, st.ID, 10*time.Second)
	if err != nil {
		log.Fatal(err) // supervisor.ErrStillRunning at the deadline
	}
	out, err := sup.Jobs().Output(ctx, st.ID, supervisor.Stdout, supervisor.CursorNext, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s%s, exit code %d\n", out.Data, out.State, *res.ExitCode)
	// Output:
	// line 1
	// line 2
	// line 3
	// exited, exit code 0
}

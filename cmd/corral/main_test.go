package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary act as `corral` inside the scripts: run as
// a command named corral, it is corral's main.
func TestMain(m *testing.M) {
	testscript.Main(cleanupM{m}, map[string]func(){"corral": main})
}

// cleanupM runs the tests, then removes what they shared (the corral binary
// corralBinary built once); testscript.Main exits with Run's code.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	removeBuilt()
	return code
}

// TestScripts runs testdata/script/*.txtar. Every script gets its own
// CORRAL_DATA_DIR under $WORK, so spill files never leave the test. The
// scripts' corral is this test binary; the corral-server it executes for
// serve, mcp and doctor is the one corralBinary built, found on PATH (the
// scripts that need it skip with -short, which builds nothing).
//
// Extra commands:
//
//	status N PROG ARGS...          run PROG like exec and require exit code N
//	jsonfields KEY|. NAMES...      the JSON object on stdout (or its member KEY) has
//	                               exactly the fields NAMES, no more, no fewer
//	capture stdout|stderr RE VAR   set $VAR to the first group of RE's first match
func TestScripts(t *testing.T) {
	t.Parallel()
	var serverDir string
	if !testing.Short() {
		serverDir = filepath.Dir(corralBinary(t))
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("CORRAL_DATA_DIR", env.WorkDir+"/data")
			env.Setenv("HOME", env.WorkDir+"/home")
			if serverDir != "" {
				env.Setenv("PATH", serverDir+string(filepath.ListSeparator)+env.Getenv("PATH"))
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status":     cmdStatus,
			"jsonfields": cmdJSONFields,
			"capture":    cmdCapture,
		},
		RequireExplicitExec: true,
	})
}

// cmdStatus runs a program and checks its exit code.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N PROG ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("status: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}

// cmdJSONFields checks the field names of the JSON object on stdout.
func cmdJSONFields(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: jsonfields KEY|. NAMES...")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(ts.ReadFile("stdout")), &obj); err != nil {
		ts.Fatalf("jsonfields: stdout: %v", err)
	}
	if args[0] != "." {
		raw, ok := obj[args[0]]
		if !ok {
			ts.Fatalf("jsonfields: no field %q", args[0])
		}
		obj = nil
		if err := json.Unmarshal(raw, &obj); err != nil {
			ts.Fatalf("jsonfields: %s: %v", args[0], err)
		}
	}
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	want := slices.Clone(args[1:])
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		ts.Fatalf("fields of %s: %s, want %s", args[0], strings.Join(got, " "), strings.Join(want, " "))
	}
}

// cmdCapture sets an environment variable from a regexp group of the last
// command's stdout or stderr.
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || (args[0] != "stdout" && args[0] != "stderr") {
		ts.Fatalf("usage: capture stdout|stderr RE VAR")
	}
	re, err := regexp.Compile(`(?m)` + args[1])
	if err != nil {
		ts.Fatalf("capture: %v", err)
	}
	m := re.FindStringSubmatch(ts.ReadFile(args[0]))
	if len(m) < 2 {
		ts.Fatalf("capture: no match for %q in %s", args[1], args[0])
	}
	ts.Setenv(args[2], m[1])
}

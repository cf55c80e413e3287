package proctest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// HelperEnv names the environment variable that selects a helper in a re-executed test binary.
const HelperEnv = "CORRAL_TEST_HELPER"

// A HelperFunc is the body of a helper process. It gets the arguments after the binary name
// and returns the process exit code.
type HelperFunc func(args []string) int

var (
	helpersMu sync.Mutex
	helpers   = map[string]HelperFunc{} // guarded by helpersMu
)

// Register adds a helper under name, for tests that need one the package does not provide.
// Call it before Main, for example from TestMain or an init function. It panics if name is
// already taken. It is safe for concurrent use.
func Register(name string, fn HelperFunc) {
	helpersMu.Lock()
	defer helpersMu.Unlock()
	if _, dup := helpers[name]; dup {
		panic("proctest: helper registered twice: " + name)
	}
	helpers[name] = fn
}

func init() {
	Register("sleep", helperSleep)
	Register("lines", helperLines)
	Register("flood", helperFlood)
	Register("exit", helperExit)
	Register("env", helperEnv)
	Register("stdin", helperStdin)
	registerPlatformHelpers()
}

// Main runs the helper named by CORRAL_TEST_HELPER and exits with its code if the variable is
// set, and otherwise runs the tests with m.Run and exits with its code. Call it from TestMain.
//
// Built-in helpers (durations are seconds, fractions allowed; deadlines use the monotonic clock):
//
//	sleep <sec>                      sleep, then exit 0
//	ignoreterm <sec>                 ignore SIGTERM, print "ready\n", sleep, exit 0
//	lines <n> [width]                print lines "1".."n", each padded with '.' to width bytes
//	flood <bytes> stdout|stderr      write that many bytes ("x" lines) in 64 KiB chunks
//	exit <code>                      exit with code
//	killself <signal-number>         restore the signal's default action and send it to itself
//	env <NAME>                       print the variable's value, or "<unset>", and a newline
//	stdin                            copy stdin to stdout, then print "read <n> bytes\n" on stderr
//	escaper <sec>                    start a plain, a setsid and a double-forked writer, print
//	                                 "started\n" once all three exist, and exit 0; each writer
//	                                 prints "<tag> <pid> alive\n" (tag plain, setsid or daemon)
//	                                 to the inherited stdout every 100 ms, ignores SIGPIPE, and
//	                                 exits at the deadline
//	bomb <sec> plain|setsid|dfork [maxProcs]
//	                                 fork bomb by re-execution; see below
//
// The bomb's root prints "ready <n>\n" on stdout once it has started its first n children
// (with maxProcs, all of its share; without, the C bomb announces its first child and the Go
// fallback its first four). The bomb is bomb.c compiled with the system C compiler where one
// exists (a process then costs a fork, not a Go runtime), else re-execution of this binary.
// Without maxProcs every process keeps starting children until the deadline (bounded only by
// pids.max or RLIMIT_NPROC; spawn failures back off up to 100 ms). With maxProcs the tree has
// exactly maxProcs processes if every spawn succeeds: each process keeps one for itself and
// divides the rest among at most four children. setsid children call setsid; dfork children
// call setsid, start the next process and exit, so it is reparented. All of them exit 0 at the
// root's deadline. Bomb and escaper are unavailable on Windows (exit code 2).
func Main(m *testing.M) {
	if name := os.Getenv(HelperEnv); name != "" {
		os.Exit(runHelper(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runHelper runs the named helper; unknown names exit 2.
func runHelper(name string, args []string) int {
	helpersMu.Lock()
	fn := helpers[name]
	helpersMu.Unlock()
	if fn == nil {
		fmt.Fprintf(os.Stderr, "proctest: unknown helper %q\n", name)
		return 2
	}
	return fn(args)
}

// Argv returns the argv that runs this test binary (os.Executable) as helper name with args,
// and the environment entry "CORRAL_TEST_HELPER=name" to add to the command's environment.
// It panics if the executable cannot be found, which cannot happen in a test binary on the
// supported platforms.
func Argv(name string, args ...string) (argv []string, env string) {
	exe, err := os.Executable()
	if err != nil {
		panic("proctest: " + err.Error())
	}
	return append([]string{exe}, args...), HelperEnv + "=" + name
}

// Command returns a shell command line, for `bash -c`, that runs this test binary as helper
// name with args, for example `CORRAL_TEST_HELPER=escaper '/tmp/x/pkg.test' '5'`. Every word
// is single-quoted as needed.
func Command(name string, args ...string) string {
	argv, _ := Argv(name, args...)
	words := []string{HelperEnv + "=" + shellQuote(name)}
	for _, a := range argv {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell, leaving plain words alone.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// usage reports a helper called with bad arguments; exit code 2.
func usage(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "proctest: usage: "+format+"\n", a...)
	return 2
}

// seconds parses a duration in (possibly fractional) seconds.
func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("proctest: bad seconds %q", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func helperSleep(args []string) int {
	if len(args) != 1 {
		return usage("sleep <sec>")
	}
	d, err := seconds(args[0])
	if err != nil {
		return usage("sleep <sec>: %v", err)
	}
	time.Sleep(d)
	return 0
}

func helperLines(args []string) int {
	if len(args) < 1 || len(args) > 2 {
		return usage("lines <n> [width]")
	}
	n, err1 := strconv.Atoi(args[0])
	width, err2 := 0, error(nil)
	if len(args) == 2 {
		width, err2 = strconv.Atoi(args[1])
	}
	if err1 != nil || err2 != nil {
		return usage("lines <n> [width]")
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 1; i <= n; i++ {
		s := strconv.Itoa(i)
		w.WriteString(s)
		for k := len(s); k < width; k++ {
			w.WriteByte('.')
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return 1
	}
	return 0
}

func helperFlood(args []string) int {
	if len(args) != 2 {
		return usage("flood <bytes> stdout|stderr")
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n < 0 {
		return usage("flood <bytes> stdout|stderr")
	}
	out := os.Stdout
	switch args[1] {
	case "stdout":
	case "stderr":
		out = os.Stderr
	default:
		return usage("flood <bytes> stdout|stderr")
	}
	chunk := []byte(strings.Repeat(strings.Repeat("x", 63)+"\n", 1024)) // 64 KiB
	for n > 0 {
		c := chunk[:min(n, int64(len(chunk)))]
		if _, err := out.Write(c); err != nil {
			return 1
		}
		n -= int64(len(c))
	}
	return 0
}

func helperExit(args []string) int {
	if len(args) != 1 {
		return usage("exit <code>")
	}
	code, err := strconv.Atoi(args[0])
	if err != nil {
		return usage("exit <code>")
	}
	return code
}

func helperEnv(args []string) int {
	if len(args) != 1 {
		return usage("env <NAME>")
	}
	v, ok := os.LookupEnv(args[0])
	if !ok {
		v = "<unset>"
	}
	fmt.Println(v)
	return 0
}

func helperStdin(args []string) int {
	if len(args) != 0 {
		return usage("stdin")
	}
	n, err := io.Copy(os.Stdout, os.Stdin)
	fmt.Fprintf(os.Stderr, "read %d bytes\n", n)
	if err != nil {
		return 1
	}
	return 0
}

//go:build linux

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/internal/proctest"
	"github.com/corral-sh/corral/supervisor"
)

// The model budget and the capture ceiling per stream (docs/wire.md, Limits).
const (
	viewBytes    = 96 << 10
	viewLines    = 4000
	captureBytes = 512 << 10
	maxMarker    = 512
)

// checkView checks what every stream view promises: valid UTF-8, within the
// budget plus one marker, and the marker exactly when the stream was cut.
func checkView(t *testing.T, stream, view string, info budget.Info) {
	t.Helper()
	if !utf8.ValidString(view) {
		t.Errorf("%s view is not valid UTF-8", stream)
	}
	if info.KeptBytes > viewBytes || info.KeptLines > viewLines || len(view) > viewBytes+maxMarker {
		t.Errorf("%s view: %d bytes, info %+v; want at most %d bytes and %d lines plus a marker", stream, len(view), info, viewBytes, viewLines)
	}
	if marked := strings.Contains(view, "[truncated:") || strings.HasPrefix(view, "[binary output:"); marked != info.Truncated {
		t.Errorf("%s view has a marker: %v, info.Truncated %v", stream, marked, info.Truncated)
	}
}

// vmHWM matches the line `grep VmHWM /proc/$PPID/status` prints: the peak
// resident set of the command's parent, the corral process.
var vmHWM = regexp.MustCompile(`VmHWM:\s+(\d+) kB`)

// peakKB runs `command; grep VmHWM /proc/$PPID/status >&2` through the CLI and
// returns corral's peak RSS in kB, read by the command itself after the
// flood, so no sampling can miss the peak.
func peakKB(t *testing.T, command string) (int64, supervisor.Result) {
	t.Helper()
	m := marker(t)
	r := cliFrontend("").run(t, call{command: command + "; grep VmHWM /proc/$PPID/status >&2", marker: m, timeout: 300})
	checkGone(t, m)
	sub := vmHWM.FindStringSubmatch(r.Stderr)
	if sub == nil {
		t.Fatalf("no VmHWM line in stderr %q", r.Stderr)
	}
	kb, _ := strconv.ParseInt(sub[1], 10, 64)
	return kb, r
}

// TestFloods drives corral's drain with floods through the CLI, the server
// and the library. Each ends with the marker oracle, and the group with the
// zombie and descriptor oracles.
func TestFloods(t *testing.T) {
	proctest.Heavy(t)
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		cli := cliFrontend("")
		t.Run("stderr-1GB", func(t *testing.T) {
			t.Parallel()
			m := marker(t)
			r := cli.run(t, call{command: `yes | head -c 1G >&2`, marker: m, timeout: 300})
			checkGone(t, m)
			if exitCode(r) != 0 || r.Stdout != "" || r.StderrInfo.TotalBytes != 1<<30 || r.StderrInfo.TotalLines != 1<<29 {
				t.Errorf("exit %d stdout %q stderrInfo %+v, want exit 0, no stdout, 1 GiB in 2^29 lines", exitCode(r), r.Stdout, r.StderrInfo)
			}
			checkView(t, "stderr", r.Stderr, r.StderrInfo)
			// Tail policy: the marker first, then the last lines.
			if !strings.HasPrefix(r.Stderr, "[truncated:") || !strings.HasSuffix(r.Stderr, "\ny\ny\n") || r.StderrInfo.KeptLines != viewLines {
				t.Errorf("stderr view %.80q...%q (kept %d lines), want the marker then the last %d lines", r.Stderr, r.Stderr[max(0, len(r.Stderr)-20):], r.StderrInfo.KeptLines, viewLines)
			}
		})
		t.Run("stdout-flood-constant-memory", func(t *testing.T) {
			t.Parallel()
			n := int64(10 << 30)
			if testing.Short() {
				n = 1 << 30 // -short: 1 GiB instead of 10.
			}
			base, _ := peakKB(t, "true")
			peak, r := peakKB(t, fmt.Sprintf("head -c %d /dev/zero", n))
			t.Logf("corral peak RSS: %d kB after %d bytes of stdout, %d kB after none", peak, n, base)
			if r.StdoutInfo.TotalBytes != n || !r.StdoutInfo.Binary || r.StdoutInfo.CapturedBytes != captureBytes {
				t.Errorf("stdoutInfo %+v, want %d bytes, binary, %d captured", r.StdoutInfo, n, captureBytes)
			}
			// Constant memory: the flood may add the two capture ceilings and
			// I/O buffers to the idle peak, nothing that grows with n.
			if peak > base+16<<10 {
				t.Errorf("corral's peak RSS grew from %d kB to %d kB while draining %d bytes", base, peak, n)
			}
		})
		t.Run("50MB-line-without-newline", func(t *testing.T) {
			t.Parallel()
			m := marker(t)
			r := cli.run(t, call{command: `head -c 50M /dev/zero | tr '\0' a`, marker: m})
			checkGone(t, m)
			if r.StdoutInfo.TotalBytes != 50<<20 || r.StdoutInfo.TotalLines != 1 || !r.StdoutInfo.Truncated {
				t.Errorf("stdoutInfo %+v, want one cut line of 50 MiB", r.StdoutInfo)
			}
			checkView(t, "stdout", r.Stdout, r.StdoutInfo)
			if !strings.HasPrefix(r.Stdout, strings.Repeat("a", 1000)) {
				t.Errorf("stdout view starts %.40q, want the head of the line", r.Stdout)
			}
		})
		t.Run("300000-short-lines", func(t *testing.T) {
			t.Parallel()
			m := marker(t)
			r := cli.run(t, call{command: `seq 1 300000; seq 1 300000 >&2`, marker: m})
			checkGone(t, m)
			var want int64
			for i := 1; i <= 300000; i++ {
				want += int64(len(strconv.Itoa(i))) + 1
			}
			for _, s := range []struct {
				name, view string
				info       budget.Info
			}{{"stdout", r.Stdout, r.StdoutInfo}, {"stderr", r.Stderr, r.StderrInfo}} {
				if s.info.TotalLines != 300000 || s.info.TotalBytes != want || !s.info.Truncated {
					t.Errorf("%s info %+v, want 300000 lines, %d bytes, cut", s.name, s.info, want)
				}
				checkView(t, s.name, s.view, s.info)
			}
			// Head of stdout: the first lines, in order; tail of stderr: the last ones.
			if !strings.HasPrefix(r.Stdout, "1\n2\n3\n") || !strings.HasSuffix(r.Stderr, "299999\n300000\n") {
				t.Errorf("stdout starts %.20q, stderr ends %q; want seq's first and last lines", r.Stdout, r.Stderr[max(0, len(r.Stderr)-20):])
			}
		})
	})
}

// TestShapes checks binary output, ANSI colours and \r progress bars through
// the CLI, the server and the library.
func TestShapes(t *testing.T) {
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		srv := startServer(t)
		sup := newLib(t, supervisor.Config{})
		for _, f := range []frontend{cliFrontend(""), srv.frontend(), libFrontend(sup)} {
			t.Run(f.name+"/binary", func(t *testing.T) {
				t.Parallel()
				m := marker(t)
				r := f.run(t, call{command: `printf 'PNG\0\1\2'; head -c 4090 /dev/urandom`, marker: m})
				checkGone(t, m)
				if !strings.HasPrefix(r.Stdout, "[binary output: 4096 bytes") || !r.StdoutInfo.Binary || r.StdoutInfo.TotalBytes != 4096 {
					t.Errorf("stdout %q info %+v, want the binary line for 4096 bytes", r.Stdout, r.StdoutInfo)
				}
				checkView(t, "stdout", r.Stdout, r.StdoutInfo)
			})
			t.Run(f.name+"/ansi-and-progress-bar", func(t *testing.T) {
				t.Parallel()
				m := marker(t)
				r := f.run(t, call{command: `printf '\033[1;31mred\033[0m\n'; for i in $(seq 1 100); do printf '\r%3d%%' $i; done; echo`, marker: m})
				checkGone(t, m)
				if r.Stdout != "red\n100%\n" || r.StdoutInfo.EscapesRemoved != 2 || r.StdoutInfo.RedrawsCollapsed != 99 {
					t.Errorf("stdout %q info %+v, want \"red\\n100%%\\n\" with 2 escapes removed and 99 redraws collapsed", r.Stdout, r.StdoutInfo)
				}
			})
		}
	})
}

// boundaries are offsets where output gets cut or split: a page, the pipe
// buffer and read size, the model budget, twice the pipe buffer, and the
// capture ceiling and live cap.
var boundaries = []int{4096, 65536, viewBytes, 131072, captureBytes}

// emoji is a 4-byte UTF-8 character.
const emoji = "\U0001F600"

// straddle returns n bytes of one line without a newline: filler with emoji
// starting at offset off, or, when fromEnd, starting at offset off counted
// from the end. One long line is the case where a cut lands inside a line.
func straddle(n, off int, fromEnd bool) []byte {
	b := []byte(strings.Repeat("a", n-len(emoji)))
	if fromEnd {
		off = n - off - len(emoji)
	}
	return append(b[:off], append([]byte(emoji), b[off:]...)...)
}

// TestUTF8Boundaries puts a 4-byte character across every boundary (shifted
// by 1, 2 and 3 bytes so each split point is hit) in stdout (head policy,
// counted from the start) and stderr (tail policy, counted from the end),
// through the library with live events. The views and the concatenated live
// output must be valid UTF-8 with nothing replaced, and be a prefix (head) or
// suffix (tail) of what the command wrote.
func TestUTF8Boundaries(t *testing.T) {
	warmUp(t)
	check := processOracles(t)
	defer check()
	t.Run("group", func(t *testing.T) {
		sup := newLib(t, supervisor.Config{})
		for _, b := range boundaries {
			for shift := 1; shift < len(emoji); shift++ {
				t.Run(fmt.Sprintf("%d-%d", b, shift), func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					out := straddle(b+1000, b-shift, false)
					errOut := straddle(b+1000, b-shift, true)
					writeFile(t, filepath.Join(dir, "out"), out)
					writeFile(t, filepath.Join(dir, "err"), errOut)
					var live [2]strings.Builder
					m := marker(t)
					r := runLib(t, sup, call{command: "cat out; cat err >&2", marker: m, dir: dir}, func(ev supervisor.Event) {
						if ev.Event == supervisor.EventOutput {
							live[streamIndex(ev.Stream)].WriteString(ev.Data)
						}
					})
					checkGone(t, m)
					checkView(t, "stdout", r.Stdout, r.StdoutInfo)
					checkView(t, "stderr", r.Stderr, r.StderrInfo)
					if r.StdoutInfo.InvalidBytes != 0 || r.StderrInfo.InvalidBytes != 0 || strings.ContainsRune(r.Stdout+r.Stderr, utf8.RuneError) {
						t.Errorf("a character was replaced: stdout info %+v, stderr info %+v", r.StdoutInfo, r.StderrInfo)
					}
					if kept := r.Stdout[:r.StdoutInfo.KeptBytes]; !strings.HasPrefix(string(out), kept) {
						t.Errorf("stdout view (%d bytes) is not a prefix of the output", len(kept))
					}
					if kept := r.Stderr[int64(len(r.Stderr))-r.StderrInfo.KeptBytes:]; !strings.HasSuffix(string(errOut), kept) {
						t.Errorf("stderr view (%d bytes) is not a suffix of the output", len(kept))
					}
					for i, want := range [][]byte{out, errOut} {
						got := live[i].String()
						// Live output is cut at the live cap, on a character boundary.
						if !utf8.ValidString(got) || !strings.HasPrefix(string(want), got) || len(got) < min(len(want), supervisor.DefaultLiveCap)-len(emoji)+1 {
							t.Errorf("live %s: %d bytes, valid UTF-8 %v, prefix of the output %v; want the output up to the live cap",
								[]string{"stdout", "stderr"}[i], len(got), utf8.ValidString(got), strings.HasPrefix(string(want), got))
						}
					}
				})
			}
		}
	})
}

func streamIndex(s supervisor.Stream) int {
	if s == supervisor.Stderr {
		return 1
	}
	return 0
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

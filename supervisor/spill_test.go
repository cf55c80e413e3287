package supervisor

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/corral-sh/corral/budget"
	"github.com/corral-sh/corral/spill"
)

// TestRunHeadTailSpill: a head+tail stream keeps at most the capture
// ceiling in all, and its spill holds the head and the very tail the view
// shows, with the gap between them recorded, so a Read of the file never
// lacks what the view promised was saved.
func TestRunHeadTailSpill(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newSup(t, Config{DataDir: data})
	res := run(t, s, Request{Command: "seq 1 1000000", StdoutPolicy: budget.PolicyHeadTail})
	info := res.StdoutInfo
	if !info.Truncated || info.SpillPath == "" || info.TotalBytes != 6888896 {
		t.Fatalf("stdout info %+v", info)
	}
	if info.CapturedBytes > 512<<10 {
		t.Errorf("head+tail captured %d bytes, over the 512 KiB ceiling", info.CapturedBytes)
	}
	spilled, err := os.ReadFile(info.SpillPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(spilled) > 512<<10 || !bytes.HasPrefix(spilled, []byte("1\n2\n3\n")) || !bytes.HasSuffix(spilled, []byte("\n999999\n1000000\n")) {
		t.Fatalf("spill of %d bytes, starting %q, ending %q", len(spilled), spilled[:12], spilled[len(spilled)-16:])
	}
	// Every line the view shows is in the file.
	head, tail, ok := strings.Cut(res.Stdout, "[truncated: ")
	_, tail, _ = strings.Cut(tail, "]\n")
	if !ok || !strings.HasSuffix(tail, "1000000\n") {
		t.Fatalf("view has no head+tail marker: ends %q", res.Stdout[len(res.Stdout)-200:])
	}
	for _, part := range []string{head, tail} {
		if !bytes.Contains(spilled, []byte(part)) {
			t.Errorf("the view shows %q … %q, which the spill does not hold", part[:20], part[len(part)-20:])
		}
	}

	// The extent says what the file holds of the stream.
	st, err := spill.New(data, spill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, ext, err := st.Open(info.SpillPath)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !ext.Partial() || ext.StreamBytes != info.TotalBytes || ext.HeadBytes+ext.TailBytes != int64(len(spilled)) || ext.TailBytes == 0 {
		t.Errorf("extent %+v for a %d-byte file of a %d-byte stream", ext, len(spilled), info.TotalBytes)
	}
	if n := ext.Notice(); !strings.Contains(n, "the last") || !strings.Contains(n, "of 6888896 bytes") {
		t.Errorf("notice %q", n)
	}
}

// TestRunHeadSpillExtent: a head spill that stopped at the cap records the
// whole stream's size; one that holds everything records no gap.
func TestRunHeadSpillExtent(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	s := newSup(t, Config{DataDir: data})
	st, err := spill.New(data, spill.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tests := []struct {
		command string
		partial bool
	}{
		{"seq 1 1000000", true}, // 6.9 MB: the file holds the first 512 KiB
		{"seq 1 100000", true},  // 589 KB: just over the cap
		{"seq 1 20000", false},  // 109 KB: over the view, the file holds all
	}
	for _, tt := range tests {
		res := run(t, s, Request{Command: tt.command})
		f, ext, err := st.Open(res.StdoutInfo.SpillPath)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if ext.StreamBytes != res.StdoutInfo.TotalBytes {
			t.Errorf("%s: extent %+v, stream %d bytes", tt.command, ext, res.StdoutInfo.TotalBytes)
		}
		if ext.Partial() != tt.partial {
			t.Errorf("%s: partial %v, want %v (extent %+v)", tt.command, ext.Partial(), tt.partial, ext)
		}
	}
}

package supervisor

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLiveCapUTF8: the cap never cuts a character; every event's data is
// valid UTF-8 and together they are a prefix of the stream.
func TestLiveCapUTF8(t *testing.T) {
	t.Parallel()
	const euro = "€" // 3 bytes
	for limit := int64(1); limit <= 12; limit++ {
		var got strings.Builder
		var capped int
		l := newLive(func(ev Event) {
			if !utf8.ValidString(ev.Data) {
				t.Errorf("cap %d: invalid data %q", limit, ev.Data)
			}
			got.WriteString(ev.Data)
			if ev.Event == EventCapped {
				capped++
			}
		}, limit)
		go l.run()
		stream := strings.Repeat(euro, 5)
		for i := 0; i < len(stream); i += 2 { // chunks split characters
			l.push(stdoutStream, []byte(stream[i:min(i+2, len(stream))]))
		}
		l.eof(stdoutStream)
		l.eof(stderrStream)
		<-l.done
		if !strings.HasPrefix(stream, got.String()) || int64(got.Len()) > limit || capped != 1 {
			t.Errorf("cap %d: got %q, %d capped events", limit, got.String(), capped)
		}
	}
}

// TestStreamIndexString: the index names its stream as the wire does.
func TestStreamIndexString(t *testing.T) {
	t.Parallel()
	if got := stdoutStream.String(); got != string(Stdout) {
		t.Errorf("stdoutStream = %q", got)
	}
	if got := stderrStream.String(); got != string(Stderr) {
		t.Errorf("stderrStream = %q", got)
	}
}

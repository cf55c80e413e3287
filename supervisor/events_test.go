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

// TestLivePastCapNoWake: once a stream is capped, a push of more output
// wakes no dispatcher (a flood past the live cap would otherwise cost a
// goroutine wake-up per read: the CLI's 2 GiB drain ran at 0.56x of
// os/exec's with them), and the capped event still goes out.
func TestLivePastCapNoWake(t *testing.T) {
	t.Parallel()
	var events []Event
	l := newLive(func(ev Event) { events = append(events, ev) }, 8)
	l.push(stdoutStream, []byte("0123456789")) // caps the stream
	if len(l.wake) != 1 {
		t.Fatalf("the capping push left %d wake-ups, want 1", len(l.wake))
	}
	<-l.wake
	for range 100 {
		l.push(stdoutStream, []byte("more"))
	}
	if len(l.wake) != 0 {
		t.Fatalf("pushes past the cap woke the dispatcher")
	}
	l.poke() // stand in for the wake-up taken above
	l.eof(stdoutStream)
	l.eof(stderrStream)
	go l.run()
	<-l.done
	var data string
	capped := 0
	for _, ev := range events {
		data += ev.Data
		if ev.Event == EventCapped {
			capped++
		}
	}
	if data != "01234567" || capped != 1 {
		t.Errorf("delivered %q with %d capped events, want \"01234567\" and 1", data, capped)
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

package budget

import "strconv"

// SpillKept describes what a spill file holds of its stream: its first
// HeadBytes bytes are the stream's first, its last TailBytes bytes the
// stream's last, of StreamBytes in all. A SpillKept whose parts add up to
// the whole stream (or whose StreamBytes is 0) describes a whole copy.
type SpillKept struct {
	HeadBytes, TailBytes, StreamBytes int64
}

// partial reports whether the file holds less than the whole stream.
func (k SpillKept) partial() bool {
	return k.StreamBytes > 0 && k.HeadBytes+k.TailBytes < k.StreamBytes
}

// extent names the bytes a partial file holds: "up to byte N of M", "after
// byte X of M", or "up to byte N and after byte X of M".
func (k SpillKept) extent() string {
	var s string
	if k.HeadBytes > 0 {
		s = "up to byte " + strconv.FormatInt(k.HeadBytes, 10)
	}
	if k.TailBytes > 0 {
		if s != "" {
			s += " and "
		}
		s += "after byte " + strconv.FormatInt(k.StreamBytes-k.TailBytes, 10)
	}
	return s + " of " + strconv.FormatInt(k.StreamBytes, 10)
}

// spillSentence is the marker's sentence naming the spill file (spec §3).
// "Full output saved to <path>" is said only of a whole copy; a partial one
// says which bytes of the stream it holds: "Output up to byte N of M saved
// to <path>".
func spillSentence(k SpillKept, path string) string {
	if !k.partial() {
		return spillPrefix + path + spillSuffix
	}
	return " Output " + k.extent() + " saved to " + path + spillSuffix
}

// binarySaved is the binary-output line's clause naming the spill file:
// "; saved to <path>", or for a partial copy "; output up to byte N of M
// saved to <path>".
func binarySaved(k SpillKept, path string) string {
	if !k.partial() {
		return "; saved to " + path
	}
	return "; output " + k.extent() + " saved to " + path
}

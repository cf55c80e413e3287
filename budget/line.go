package budget

// CleanLine returns one line of raw terminal output (without its '\n') as a
// model view shows it: ANSI escape sequences stripped, carriage-return
// redraws collapsed to what the last one left, invalid UTF-8 and NUL bytes
// replaced with U+FFFD. It never cuts. Pure and safe for concurrent use.
func CleanLine(b []byte) string {
	var c cleaner
	return string(c.line(b))
}

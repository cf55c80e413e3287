// Package lines holds the newline arithmetic that capture and ringtail
// share: counting and finding newlines with the vectorised bytes functions,
// never a per-byte Go loop, since both sit on the path that drains a pipe.
package lines

// Package utf8cut finds where a byte slice may be cut without splitting a
// UTF-8 character: every place in corral that cuts a stream (the budget's
// views and markers, the live events, the job output window) asks it, so
// the rule lives once. It looks at most utf8.UTFMax-1 bytes from the edge
// and allocates nothing. Bytes that are not UTF-8 are left to the caller:
// a cut next to them is as good as any other.
package utf8cut

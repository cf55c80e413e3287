// Package killtree starts a command in a containment and kills its whole
// process tree. (Full documentation below is being written.)
package killtree

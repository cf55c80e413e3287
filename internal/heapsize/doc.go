// Package heapsize says how much memory the Go allocator takes for an
// allocation of pointer-free data (a byte buffer or a string) of a given
// length: the length rounded up to the allocator's size class, or to whole
// 8 KiB pages for an allocation over 32 KiB. Caps on retained memory count
// this, not the length: a 98,400-byte view takes 106,496 bytes.
package heapsize

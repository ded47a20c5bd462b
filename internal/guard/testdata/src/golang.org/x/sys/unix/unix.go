// Package unix stands in for golang.org/x/sys/unix.
package unix

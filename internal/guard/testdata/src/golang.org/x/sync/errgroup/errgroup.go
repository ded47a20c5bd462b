// Package errgroup stands in for golang.org/x/sync/errgroup.
package errgroup

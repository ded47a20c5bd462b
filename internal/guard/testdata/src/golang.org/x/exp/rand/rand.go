// Package rand stands in for golang.org/x/exp/rand.
package rand

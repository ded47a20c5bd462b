// Package simsub is below sim: the exemption does not reach it.
package simsub

import (
	"crypto/rand" // want `forbidden-import: import of crypto/rand`
	"io"
)

func swap(seeded io.Reader) {
	rand.Reader = seeded
}

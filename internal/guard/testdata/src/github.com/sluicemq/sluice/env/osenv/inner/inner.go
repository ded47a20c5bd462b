// Package inner is below osenv, and skipped with it.
package inner

import "net"

var _ = net.Dial

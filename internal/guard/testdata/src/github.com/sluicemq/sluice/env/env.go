// Package env is a core package: its name sits next to osenv, but the
// exemption of osenv does not cover it.
package env

import "os" // want `forbidden-import: import of os`

var _ = os.Getpid

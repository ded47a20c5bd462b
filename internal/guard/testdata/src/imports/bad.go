// Package imports shows the imports the guard rejects.
package imports

import (
	_ "crypto/rand"                // want `forbidden-import: import of crypto/rand: randomness must come from env.Rand`
	_ "golang.org/x/exp/rand"      // want `forbidden-import: import of golang.org/x/exp/rand: randomness must come from env.Rand`
	_ "golang.org/x/sync/errgroup" // want `forbidden-import: import of golang.org/x/sync/errgroup`
	_ "golang.org/x/sys/unix"      // want `forbidden-import: import of golang.org/x/sys/unix`
	_ "hash/maphash"               // want `forbidden-import: import of hash/maphash: its seeds are random`
	_ "io/ioutil"                  // want `forbidden-import: import of io/ioutil`
	_ "log"                        // want `forbidden-import: import of log:`
	_ "log/syslog"                 // want `forbidden-import: import of log/syslog`
	_ "math/rand"                  // want `forbidden-import: import of math/rand:`
	_ "math/rand/v2"               // want `forbidden-import: import of math/rand/v2`
	_ "net"                        // want `forbidden-import: import of net: connections go through env.Net`
	_ "net/url"                    // want `forbidden-import: import of net/url`
	_ "os"                         // want `forbidden-import: import of os:`
	_ "os/signal"                  // want `forbidden-import: import of os/signal`
	_ "runtime/debug"              // want `forbidden-import: import of runtime/debug`
	_ "sync"                       // want `forbidden-import: import of sync:`
	_ "sync/atomic"                // want `forbidden-import: import of sync/atomic`
	_ "syscall"                    // want `forbidden-import: import of syscall`
	_ "unsafe"                     // want `forbidden-import: import of unsafe`
	_ "weak"                       // want `forbidden-import: import of weak: a weak pointer turns nil when the collector runs`
)

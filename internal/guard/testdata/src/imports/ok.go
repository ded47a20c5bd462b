package imports

// Pure packages pass, net/netip among them: its address types are values
// with no I/O. And "osx" only looks like os.
import (
	_ "bytes"
	_ "context"
	_ "encoding/binary"
	_ "hash/crc32"
	_ "io/fs"
	_ "log/slog"
	_ "math"
	_ "net/netip"
	_ "osx"
	_ "runtime"
	_ "sort"
)

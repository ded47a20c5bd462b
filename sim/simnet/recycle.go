package simnet

import "github.com/sluicemq/sluice/env"

var _ env.FrameRecycler = (*end)(nil)

// recycledJunk is what a recycled frame is overwritten with.
const recycledJunk = 0xDB

// Recycle implements env.FrameRecycler. osenv reads the next large frame
// into a recycled one at once; the simulator overwrites it with junk at
// once, so that a handler still reading a frame it recycled sees garbage
// (a failed CRC, a wrong value) in the simulation's checks instead of, in
// production, someone else's records.
func (e *end) Recycle(frame []byte) {
	for i := range frame {
		frame[i] = recycledJunk
	}
}

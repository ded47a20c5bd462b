package node

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/faultfs"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startSecond starts another broker over n1's disk, in the running
// process, and returns it with a count of the calls it made to the disk
// and the error its Start reported.
func (s *simBroker) startSecond() (*Broker, *faultfs.Rule, error) {
	s.t.Helper()
	n1 := s.world.Node("n1")
	var b *Broker
	var startErr error
	started := false
	e := n1.Env()
	fsys := faultfs.New(e.FS)
	e.FS = fsys
	calls := fsys.Count(faultfs.Always())
	n1.Post(func() {
		var err error
		b, err = New(e, s.cfg)
		require.NoError(s.t, err)
		b.Start(func(err error) { startErr, started = err, true })
	})
	require.True(s.t, s.world.RunUntil(func() bool { return started }, time.Minute), "the second broker's Start never reported")
	return b, calls, startErr
}

// shutdown shuts b down cleanly on n1's loop.
func (s *simBroker) shutdown(b *Broker) {
	s.t.Helper()
	var err error
	done := false
	s.world.Node("n1").Post(func() { b.Shutdown(func(e error) { err, done = e, true }) })
	require.True(s.t, s.world.RunUntil(func() bool { return done }, time.Minute), "Shutdown never reported")
	require.NoError(s.t, err)
}

// TestSecondBrokerOnOneDiskIsRefused: a broker over a data directory that
// another broker holds refuses to start, naming the directory and the
// holder, before it reads or writes anything there; the holder goes on
// serving. Once the holder shuts down, or its process dies (kill -9 or a
// machine crash), a new broker starts there.
func TestSecondBrokerOnOneDiskIsRefused(t *testing.T) {
	s := newSimBroker(t, 1, nil)
	_, calls, err := s.startSecond()
	require.ErrorIs(t, err, env.ErrLocked)
	require.ErrorContains(t, err, "log.dirs data is in use by another broker")
	require.ErrorContains(t, err, "simulated process 1")
	require.Equal(t, 1, calls.Hits(), "the refused broker did more than try the lock")
	require.Equal(t, stateRunning, s.broker.state)
	require.Zero(t, s.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode,
		"the holder stopped serving")

	// After a clean shutdown, a broker in the same process may take over.
	s.shutdown(s.broker)
	second, _, err := s.startSecond()
	require.NoError(t, err)
	s.broker = second
	s.connect()
	require.Zero(t, s.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse).ErrorCode)

	// A killed process holds nothing: the next incarnation boots.
	n1 := s.world.Node("n1")
	n1.Kill()
	s.broker = nil
	n1.Restart()
	s.waitRunning()
	_, _, err = s.startSecond()
	require.ErrorIs(t, err, env.ErrLocked, "the restarted broker does not hold the lock")

	// Nor does a crashed one.
	s.restart()
	_, _, err = s.startSecond()
	require.ErrorIs(t, err, env.ErrLocked)
}

// TestShutdownReleasesTheDataDirectory: after Shutdown the lock is free;
// a broker refused because of it released nothing it did not hold.
func TestShutdownReleasesTheDataDirectory(t *testing.T) {
	s := newSimBroker(t, 2, nil)
	for range 2 {
		_, _, err := s.startSecond()
		require.ErrorIs(t, err, env.ErrLocked)
		t.Log(err)
	}
	s.shutdown(s.broker)
	fsys := s.world.Node("n1").Disk()
	var lockErr error
	done := false
	s.world.Node("n1").Post(func() {
		l, err := fsys.Lock(lockName)
		if err == nil {
			err = l.Close()
		}
		lockErr, done = err, true
	})
	require.True(t, s.world.RunUntil(func() bool { return done }, time.Minute))
	require.NoError(t, lockErr, "the lock is still held after Shutdown")
}

package node

import (
	"testing"

	"github.com/sluicemq/sluice/raftmeta"
	"github.com/stretchr/testify/require"
)

func TestVoterSnapshotRoundTripsAndReadsABareImageSnapshot(t *testing.T) {
	im := raftmeta.NewImage()
	require.NoError(t, im.Apply(raftmeta.ClusterIDRecord{ClusterID: "c"}))
	image := im.EncodeSnapshot()

	require.Equal(t, image, encodeVoterSnapshot(nil, image), "no addresses: the image snapshot alone")
	addrs, got, err := decodeVoterSnapshot(image)
	require.NoError(t, err)
	require.Nil(t, addrs)
	require.Equal(t, image, got)

	want := map[uint64]string{2: "n1:9093", 5: "[::1]:9093"}
	p := encodeVoterSnapshot(want, image)
	require.Equal(t, p, encodeVoterSnapshot(map[uint64]string{5: "[::1]:9093", 2: "n1:9093"}, image), "canonical")
	addrs, got, err = decodeVoterSnapshot(p)
	require.NoError(t, err)
	require.Equal(t, want, addrs)
	require.Equal(t, image, got)
	back, addrs, err := decodeSnapshotWithVoters(p)
	require.NoError(t, err)
	require.Equal(t, want, addrs)
	require.True(t, back.Equal(im))

	// Every truncation and every flipped byte is an error, never a panic.
	for n := len(voterSnapshotMagic); n < len(p); n++ {
		_, _, err := decodeVoterSnapshot(p[:n])
		require.Error(t, err, "cut at %d", n)
	}
	for i := len(voterSnapshotMagic); i < len(p); i++ {
		q := append([]byte(nil), p...)
		q[i] ^= 0x40
		_, _, err := decodeVoterSnapshot(q)
		require.Error(t, err, "byte %d flipped", i)
	}
}

func TestVoterContextCarriesTheOtherVoters(t *testing.T) {
	addr, others := parseVoterContext([]byte("n4:9093\nvoters=1@n1:9093,2@[::1]:9093"))
	require.Equal(t, "n4:9093", addr)
	require.Equal(t, []Voter{{ID: 1, Host: "n1", Port: 9093}, {ID: 2, Host: "::1", Port: 9093}}, others)

	addr, others = parseVoterContext([]byte("n4:9093"))
	require.Equal(t, "n4:9093", addr)
	require.Nil(t, others)
	for _, ctx := range []string{"n4:9093\nvoters=bad", "n4:9093\nsomething else", "n4:9093\nvoters=1@n1:9093,1@n2:9093"} {
		addr, others = parseVoterContext([]byte(ctx))
		require.Equal(t, "n4:9093", addr, ctx)
		require.Nil(t, others, ctx)
	}
}

// FuzzDecodeVoterSnapshot: any bytes decode or fail, never panic, and what
// decodes encodes to bytes that decode to the same.
func FuzzDecodeVoterSnapshot(f *testing.F) {
	image := raftmeta.NewImage().EncodeSnapshot()
	f.Add(encodeVoterSnapshot(map[uint64]string{1: "n1:9093", 5: "n4:9093"}, image))
	f.Add(image)
	f.Add([]byte(voterSnapshotMagic))
	f.Fuzz(func(t *testing.T, p []byte) {
		addrs, got, err := decodeVoterSnapshot(p)
		if err != nil || addrs == nil {
			return
		}
		again, image, err := decodeVoterSnapshot(encodeVoterSnapshot(addrs, got))
		require.NoError(t, err)
		require.Equal(t, addrs, again)
		require.Equal(t, got, image)
	})
}

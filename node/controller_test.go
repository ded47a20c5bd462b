package node

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// postNow runs posted funcs at once, for the tracker's tests.
type postNow struct{}

func (postNow) Post(f func()) { f() }

// An answer that writes nothing waits for every proposal begun before it,
// and carries the error of one of them that failed after it began to
// wait; a failure before it began does not concern it, nor do proposals
// begun after it.
func TestProposalTrackerAnswersOnceEarlierProposalsEnd(t *testing.T) {
	var tr proposalTracker
	var got []string
	answer := func(name string) func(error) {
		return func(err error) { got = append(got, name+":"+errString(err)) }
	}
	tr.await(postNow{}, answer("idle"))
	require.Equal(t, []string{"idle:nil"}, got, "nothing in flight: at once")

	lost := errors.New("leadership lost")
	p1, p2 := tr.begin(), tr.begin()
	tr.await(postNow{}, answer("a")) // waits for 1 and 2
	p3 := tr.begin()
	tr.await(postNow{}, answer("b")) // waits for 1, 2 and 3
	tr.end(p2, nil)
	require.Len(t, got, 1, "1 is still in flight")
	tr.end(p1, lost)
	require.Equal(t, []string{"idle:nil", "a:leadership lost"}, got)
	tr.await(postNow{}, answer("c")) // after 1 failed: waits for 3 alone
	tr.end(p3, nil)
	require.Equal(t, []string{"idle:nil", "a:leadership lost", "b:leadership lost", "c:nil"}, got)
	require.Empty(t, tr.failed, "forgotten once nobody waits")
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

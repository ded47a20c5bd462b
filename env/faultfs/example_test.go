package faultfs_test

import (
	"errors"
	"fmt"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/env/faultfs"
	"github.com/sluicemq/sluice/sim/rng"
	"github.com/sluicemq/sluice/sim/sched"
	"github.com/sluicemq/sluice/sim/simfs"
)

// A disk whose second write to a file under orders-0/ finds it full, and
// whose syncs of that directory's files fail; a counter sees every sync.
func Example() {
	s := sched.New()
	disk := simfs.New(rng.New(1), sched.Direct(s, "n1"))
	fsys := faultfs.New(disk)
	orders := faultfs.PathPrefix("orders-0/")
	fsys.Inject(env.ErrNoSpace, faultfs.Nth(2, faultfs.And(orders, faultfs.Kinds(faultfs.Write))))
	syncs := fsys.Count(faultfs.Kinds(faultfs.Sync))
	failSyncs := fsys.Inject(env.ErrIO, faultfs.And(orders, faultfs.Kinds(faultfs.Sync)))

	if err := fsys.MkdirAll("orders-0"); err != nil {
		panic(err)
	}
	f, err := fsys.Create("orders-0/00.log")
	if err != nil {
		panic(err)
	}
	for _, p := range []string{"first", "second", "third"} {
		n, err := f.Write([]byte(p))
		fmt.Printf("write %q: %d, %v\n", p, n, err)
	}
	f.Sync(func(err error) {
		fmt.Println("sync:", err, "| injected:", errors.Is(err, faultfs.ErrInjected))
	})
	failSyncs.Stop()
	f.Sync(func(err error) { fmt.Println("sync after Stop:", err) })
	for s.Step() { // the callbacks run on the loop, in order
	}
	fmt.Println("syncs:", syncs.Hits(), "writes:", fsys.Calls(faultfs.Write))
	// Output:
	// write "first": 5, <nil>
	// write "second": 0, write orders-0/00.log: no space left on device (injected)
	// write "third": 5, <nil>
	// sync: sync orders-0/00.log: input/output error (injected) | injected: true
	// sync after Stop: <nil>
	// syncs: 2 writes: 3
}

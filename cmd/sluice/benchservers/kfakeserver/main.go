// Command kfakeserver runs franz-go's in-memory fake broker, kfake, as a
// process of its own, so that BenchmarkBroker measures its CPU time and RSS
// from /proc exactly as it measures sluice serve's.
//
// It listens on -port (0 picks one), prints "listening <host:port>" on
// stdout, and serves until killed. With -synthetic it stores nothing and
// answers every fetch with canned batches of 1 KiB random values: the
// consuming client's own ceiling.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "listen port on 127.0.0.1")
	synthetic := flag.Bool("synthetic", false, "store nothing; fetches answer canned 1 KiB random records")
	flag.Parse()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port)}
	if *synthetic {
		opts = append(opts, kfake.BlackholeProduce(), kfake.SyntheticFetch(kfake.SyntheticBatch{RecordBytes: 1024, RandomFrac: 1}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakeserver:", err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", c.ListenAddrs()[0])
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
	c.Close()
}

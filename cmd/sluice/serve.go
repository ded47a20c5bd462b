package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/sluicemq/sluice/env/osenv"
	"github.com/sluicemq/sluice/node"
	"github.com/spf13/cobra"
)

// serveOptions are serve's flags. Each overrides the key of the same meaning
// in the properties file.
type serveOptions struct {
	configFile string
	overrides  []string // --override key=value, repeatable, as Kafka's kafka-server-start
	nodeID     int32
	listeners  string
	logDir     string
	logLevel   string
	logFormat  string
}

func newServeCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a node (broker, controller, or both)",
		Long: `Run a node: a broker, a controller of the metadata quorum, or both.

Configuration comes from a Kafka-style properties file (--config), with
Kafka's own keys (node.id, listeners, advertised.listeners, log.dirs,
num.partitions, auto.create.topics.enable, log.retention.ms, ...);
cmd/sluice/config/server.properties is an example. Flags override the file;
--override key=value sets any key. Without --config the node uses Kafka's
defaults with one PLAINTEXT listener on 127.0.0.1:9092 and data in ./data.
A bad value, or a configuration that could never work, stops the node at
start with the key named.

Without process.roles the node runs on its own: it is the cluster's only
broker and the only voter of its metadata quorum. With process.roles
(broker, controller or broker,controller) it is one node of a KRaft
cluster, configured as in Kafka: controller.quorum.voters (id@host:port of
each controller) or controller.quorum.bootstrap.servers, the controller
listener named by controller.listener.names among listeners for a
controller, and listener.security.protocol.map for listener names other
than PLAINTEXT; cmd/sluice/config/cluster/ holds three nodes for one
machine (make cluster). Only PLAINTEXT listeners are served.

SIGTERM or SIGINT flushes every partition, writes its checkpoints and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.configFile, "config", "", "properties file (Kafka's server.properties keys)")
	f.StringArrayVar(&o.overrides, "override", nil, "key=value overriding the properties file (repeatable)")
	f.Int32Var(&o.nodeID, "node-id", -1, "node.id")
	f.StringVar(&o.listeners, "listeners", "", "listeners, e.g. PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093")
	f.StringVar(&o.logDir, "log-dir", "", "log.dirs: the data directory")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	return cmd
}

// loadConfig reads the properties file, applies the flags over it, and
// checks the result, before anything touches the data directory.
func loadConfig(o serveOptions) (node.Config, []string, error) {
	cfg := node.DefaultConfig()
	var unknown []string
	if o.configFile != "" {
		text, err := os.ReadFile(o.configFile)
		if err != nil {
			return cfg, nil, fmt.Errorf("read config: %w", err)
		}
		cfg, unknown, err = node.ParseProperties(string(text), cfg)
		if err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", o.configFile, err)
		}
	}
	props := map[string]string{}
	for _, kv := range o.overrides {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, nil, fmt.Errorf("--override %q is not key=value", kv)
		}
		props[strings.TrimSpace(k)] = v
	}
	if o.nodeID >= 0 {
		props["node.id"] = fmt.Sprint(o.nodeID)
	}
	if o.listeners != "" {
		props["listeners"] = o.listeners
	}
	if o.logDir != "" {
		props["log.dirs"] = o.logDir
	}
	cfg, more, err := node.ApplyProperties(props, cfg)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return cfg, nil, err
	}
	return cfg, append(unknown, more...), nil
}

func newLogger(o serveOptions) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", o.logLevel, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: must be text or json", o.logFormat)
}

// brokerGCPercent is the garbage collector's target unless GOGC says
// otherwise. A broker churns through request buffers while its live heap
// stays small; at Go's default of 100 it collected (and returned pages that
// it then faulted back in) several times a second. 400 cut produce CPU per
// GB by about a quarter in BenchmarkBroker before large frames were read
// into recycled buffers; with them there is little garbage left (resident
// size about 32 MiB at 400; the default was not measured again).
const brokerGCPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(brokerGCPercent)
	}
}

// serve runs one broker until a signal, then shuts it down cleanly.
func serve(cmd *cobra.Command, o serveOptions) error {
	logger, err := newLogger(o)
	if err != nil {
		return err
	}
	cfg, unknown, err := loadConfig(o)
	if err != nil {
		return err
	}
	for _, k := range unknown {
		logger.Warn("ignoring unknown config key", "key", k)
	}
	tuneGC()
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return fmt.Errorf("create log.dirs %s: %w", cfg.LogDir, err)
	}
	ocfg := osenv.Config{Dir: cfg.LogDir, Loop: osenv.NewLoop(), Log: logger, LocalAddr: cfg.OutboundLocalAddress}
	if dir := cfg.MetadataDir(); dir != cfg.LogDir {
		// metadata.log.dir, a directory of its own.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create metadata.log.dir %s: %w", dir, err)
		}
		ocfg.MetadataDir = dir
	}
	loop := ocfg.Loop
	n, err := osenv.New(ocfg)
	if err != nil {
		return err
	}
	defer n.Close()
	broker, err := node.New(n.Env(), cfg)
	if err != nil {
		return err
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)

	var runErr error
	// A node whose metadata log failed cannot know its metadata any more:
	// it exits, as Kafka's broker halts, and a restart recovers from what is
	// durable.
	broker.OnFatal(func(err error) {
		runErr = fmt.Errorf("the metadata log failed: %w", err)
		loop.Stop()
	})
	loop.Post(func() {
		broker.Start(func(err error) {
			if err != nil {
				runErr = err
				loop.Stop()
				return
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sluice: broker %d serving on %s (data in %s)\n",
				cfg.NodeID, strings.Join(broker.Addrs(), ","), cfg.LogDir)
		})
	})
	go func() {
		sig, ok := <-signals
		if !ok {
			return
		}
		logger.Info("shutting down", "signal", sig.String())
		loop.Post(func() {
			broker.Shutdown(func(err error) {
				runErr = err
				loop.Stop()
			})
		})
		// A second signal means the operator will not wait for a shutdown
		// that is stuck (a disk that no longer answers): exit at once.
		if sig, ok := <-signals; ok {
			logger.Error("second signal: exiting without a clean shutdown", "signal", sig.String())
			os.Exit(1)
		}
	}()
	loop.Run()
	if runErr != nil {
		return fmt.Errorf("broker: %w", runErr)
	}
	return nil
}

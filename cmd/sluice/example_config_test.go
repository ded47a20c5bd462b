package main

import (
	"testing"

	"github.com/sluicemq/sluice/node"
	"github.com/stretchr/testify/require"
)

// exampleConfig is the example configuration that make run uses and
// README.md documents.
const exampleConfig = "config/server.properties"

// The example configuration parses as sluice serve reads it, with no key it
// does not know, and keeps make run as it was: Kafka's defaults, one
// listener on 127.0.0.1:9092, data in ./data.
func TestExampleConfigParsesWithKnownKeysOnly(t *testing.T) {
	cfg, unknown, err := loadConfig(serveOptions{configFile: exampleConfig, nodeID: -1})
	require.NoError(t, err)
	require.Empty(t, unknown, "keys sluice serve would ignore")
	require.Equal(t, node.DefaultConfig(), cfg)
}

package simrun

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicemq/sluice/env"
	"github.com/sluicemq/sluice/jepsen"
	"github.com/sluicemq/sluice/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// session is one client's connection to the broker, made again whenever it
// breaks: a request finds the session connected, or dials first (and asks
// ApiVersions, as every Kafka client does on a new connection). One request
// is outstanding at a time, with a timeout armed on the node's clock; on
// expiry the connection is closed, which is all a Kafka client can do to
// give up on a request.
type session struct {
	e        env.Env
	addr     string
	clientID string
	client   *wire.Client // nil while disconnected
	// dialTimeout bounds a dial; simnet's own connect timeout is longer.
	dialTimeout time.Duration
	probes      *probes
	// topic is what the metadata said of the run's topic, once asked.
	topic *topicInfo
	// maxVersions is the highest version of each API the broker served
	// on the last connection, by key (-1: not served).
	maxVersions []int16
}

// served returns the highest version of API key the broker said it
// serves, or -1.
func (s *session) served(key int16) int16 {
	if key < 0 || int(key) >= len(s.maxVersions) {
		return -1
	}
	return s.maxVersions[key]
}

func (s *session) learnVersions(resp *kmsg.ApiVersionsResponse) {
	s.maxVersions = s.maxVersions[:0]
	for _, k := range resp.ApiKeys {
		if k.ApiKey < 0 || k.ApiKey > 1000 {
			continue
		}
		for int(k.ApiKey) >= len(s.maxVersions) {
			s.maxVersions = append(s.maxVersions, -1)
		}
		s.maxVersions[k.ApiKey] = k.MaxVersion
	}
}

// errTimedOut is a request that got no answer in time: its outcome is
// unknown.
var errTimedOut = errors.New("request timed out on the client")

// do sends req and calls done once with the response or an error. An error
// that wraps jepsen.NotSent means the request never left (no connection);
// any other means its outcome is unknown.
func (s *session) do(req kmsg.Request, timeout time.Duration, done func(kmsg.Response, error)) {
	if s.client != nil {
		s.send(req, timeout, done)
		return
	}
	s.connect(func(err error) {
		if err != nil {
			done(nil, jepsen.NotSent(err))
			return
		}
		s.send(req, timeout, done)
	})
}

// send sends req on the live connection with a timeout.
func (s *session) send(req kmsg.Request, timeout time.Duration, done func(kmsg.Response, error)) {
	c := s.client
	finished := false
	finish := func(resp kmsg.Response, err error) {
		if finished {
			return
		}
		finished = true
		if err != nil {
			s.drop(c)
		}
		done(resp, err)
	}
	timer := s.e.Clock.AfterFunc(timeout, func() {
		finish(nil, fmt.Errorf("%s: %w after %s", kmsg.NameForKey(req.Key()), errTimedOut, timeout))
	})
	// An error reported while Request is still running means the request
	// never left: the connection was already closed, or the write failed.
	inside := true
	c.Request(req, func(resp kmsg.Response, err error) {
		timer.Stop()
		if inside && err != nil {
			err = jepsen.NotSent(err)
		}
		finish(resp, err)
	})
	inside = false
}

// drop closes c and forgets it, if it is still the session's connection.
func (s *session) drop(c *wire.Client) {
	c.Close()
	if s.client == c {
		s.client = nil
	}
}

// connect dials the broker and exchanges ApiVersions; done gets nil once
// s.client is ready.
func (s *session) connect(done func(error)) {
	s.probes.add("client.dial")
	finished := false
	var timer env.Timer
	finish := func(c *wire.Client, err error) {
		if finished {
			if c != nil {
				c.Close() // a dial that completed after we gave up on it
			}
			return
		}
		finished = true
		timer.Stop()
		if err != nil {
			if c != nil {
				c.Close()
			}
			s.probes.add("client.dial_failed")
			done(err)
			return
		}
		s.client = c
		done(nil)
	}
	timer = s.e.Clock.AfterFunc(s.dialTimeout, func() {
		finish(nil, fmt.Errorf("dial %s: no connection after %s", s.addr, s.dialTimeout))
	})
	wire.Dial(s.e.Net, s.addr, s.clientID, func(c *wire.Client, err error) {
		if err != nil || finished {
			finish(c, err)
			return
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-sim", "1"
		c.Request(req, func(resp kmsg.Response, err error) {
			if err == nil {
				av := resp.(*kmsg.ApiVersionsResponse)
				if av.ErrorCode != 0 {
					err = fmt.Errorf("ApiVersions: %w", kerr.ErrorForCode(av.ErrorCode))
				} else if !finished {
					s.learnVersions(av)
				}
			}
			finish(c, err)
		})
	})
}

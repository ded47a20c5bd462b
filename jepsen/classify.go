package jepsen

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Outcome is what an error says about whether an operation took effect.
type Outcome int

const (
	// Unknown: the operation may or may not have taken effect, now or
	// later. The zero value, because it is the safe default.
	Unknown Outcome = iota
	// Failed: the operation definitely did not take effect.
	Failed
	// Succeeded: the operation took effect (no error).
	Succeeded
)

func (o Outcome) String() string {
	switch o {
	case Failed:
		return "failed"
	case Succeeded:
		return "succeeded"
	}
	return "unknown"
}

// Classify judges one attempt of a Kafka request by the error that ended
// it: nil succeeded; a Kafka error code that the broker answers only before
// it appends anything failed; anything else (a timeout, a lost connection, a
// code the broker also uses after appending, an error we do not recognise)
// is unknown.
//
// The error may wrap Kafka errors (*kerr.Error, with fmt.Errorf's %w); every
// error at the leaves of its tree must be a Kafka error with a definite code
// for the attempt to count as failed, so a client error that wraps both a
// timeout and the last broker answer (franz-go's "records have timed out
// ..., last err: NOT_ENOUGH_REPLICAS") stays unknown. An error wrapped by
// NotSent is failed: the request never left the client.
//
// Classify judges one attempt. An operation that retried after an attempt
// with an unknown outcome is unknown whatever its last error says: Kafka
// checks min.insync.replicas before its duplicate detection, so a retry can
// get NOT_ENOUGH_REPLICAS for a batch that the first attempt already landed.
// AfterRetries combines the attempts.
func Classify(err error) Outcome {
	if err == nil {
		return Succeeded
	}
	if _, ok := errors.AsType[*notSentError](err); ok {
		return Failed
	}
	outcome := Failed
	walkLeaves(err, func(leaf error) {
		ke, ok := leaf.(*kerr.Error)
		if !ok || ClassifyCode(ke.Code) != Failed {
			outcome = Unknown
		}
	})
	return outcome
}

// walkLeaves calls f on every error of err's tree that wraps nothing.
func walkLeaves(err error, f func(error)) {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			walkLeaves(inner, f)
			return
		}
	case interface{ Unwrap() []error }:
		inner := u.Unwrap()
		for _, e := range inner {
			if e != nil {
				walkLeaves(e, f)
			}
		}
		if len(inner) > 0 {
			return
		}
	}
	f(err)
}

// ClassifyCode judges a Kafka error code from a produce answer (a client
// decoding responses itself holds the code, not an error). 0 succeeded.
//
// The definite codes are those Apache Kafka answers before it appends to
// the log: request and record validation, authorization, producer-state
// checks, and the min.insync.replicas check (Partition.appendRecordsToLeader
// throws NOT_ENOUGH_REPLICAS before log.appendAsLeader). After the append,
// an acks=all produce waits in DelayedProduce, which completes with
// REQUEST_TIMED_OUT on expiry, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
// shrank below min.insync.replicas, NOT_LEADER_OR_FOLLOWER if this broker
// lost leadership or the replica, or KAFKA_STORAGE_ERROR if the log went
// offline: all unknown, since the appended batch may survive on the new
// leader. NOT_LEADER_OR_FOLLOWER is also answered before appending, but the
// client cannot tell which, so it stays unknown.
func ClassifyCode(code int16) Outcome {
	switch code {
	case 0:
		return Succeeded

	case kerr.CorruptMessage.Code, // CRC, size or record validation
		kerr.MessageTooLarge.Code,
		kerr.RecordListTooLarge.Code,
		kerr.InvalidTimestamp.Code,
		kerr.InvalidRecord.Code,
		kerr.UnsupportedForMessageFormat.Code,
		kerr.UnsupportedCompressionType.Code,
		kerr.InvalidRequiredAcks.Code,
		kerr.InvalidRequest.Code,
		kerr.UnsupportedVersion.Code:
		return Failed // the request was refused as it stood

	case kerr.UnknownTopicOrPartition.Code,
		kerr.UnknownTopicID.Code,
		kerr.InvalidTopicException.Code,
		kerr.LeaderNotAvailable.Code,
		kerr.TopicAuthorizationFailed.Code,
		kerr.ClusterAuthorizationFailed.Code,
		kerr.TransactionalIDAuthorizationFailed.Code:
		// No such partition here, or no right to write it. After an
		// append, DelayedProduce answers UNKNOWN_TOPIC_OR_PARTITION only
		// when the topic has left the metadata altogether, taking the
		// batch with it.
		return Failed

	case kerr.OffsetOutOfRange.Code:
		// A fetch's answer: the read happened and found nothing there.
		return Failed

	case kerr.NotEnoughReplicas.Code:
		// Checked before the append (see above); contrast
		// NOT_ENOUGH_REPLICAS_AFTER_APPEND, which is unknown.
		return Failed

	case kerr.OutOfOrderSequenceNumber.Code,
		kerr.InvalidProducerEpoch.Code,
		kerr.ProducerFenced.Code,
		kerr.UnknownProducerID.Code,
		kerr.InvalidProducerIDMapping.Code,
		kerr.InvalidTxnState.Code:
		// Producer-state validation rejects the batch before it is
		// written. (DUPLICATE_SEQUENCE_NUMBER is not here: it means the
		// batch is already in the log.)
		return Failed
	}
	return Unknown
}

// AfterRetries combines the outcomes of an operation's attempts, in order:
// succeeded if the last attempt succeeded, failed only if every attempt
// failed definitely, and unknown otherwise.
func AfterRetries(attempts ...Outcome) Outcome {
	if len(attempts) == 0 {
		return Unknown
	}
	if attempts[len(attempts)-1] == Succeeded {
		return Succeeded
	}
	for _, a := range attempts {
		if a != Failed {
			return Unknown
		}
	}
	return Failed
}

// NotSent wraps err to say that the request never left the client (no
// connection, encoding failed, the client refused it before sending), so
// the attempt definitely did not take effect whatever err is.
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &notSentError{err: err}
}

type notSentError struct{ err error }

func (e *notSentError) Error() string { return "not sent: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

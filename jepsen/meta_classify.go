package jepsen

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ClassifyMeta judges one attempt of a metadata request of type t by the
// error that ended it, as Classify does for produce: nil succeeded; an
// error whose every leaf is a Kafka error with a code ClassifyMetaCode
// calls definite failed; an error wrapped by NotSent failed; anything else
// (a timeout, a lost connection, NOT_CONTROLLER, an error we do not
// recognise) is unknown. A describe is a read: whatever ends it, it
// changed nothing, so it never needs Unknown to be safe, but it is
// classified all the same (a describe that failed tells nothing).
//
// An operation retried after an attempt of unknown outcome is unknown
// whatever its last error says (AfterRetries): a retried create answered
// TOPIC_ALREADY_EXISTS may have been created by its own first attempt.
func ClassifyMeta(t MetaType, err error) Outcome {
	if err == nil {
		return Succeeded
	}
	if _, ok := errors.AsType[*notSentError](err); ok {
		return Failed
	}
	outcome := Failed
	walkLeaves(err, func(leaf error) {
		ke, ok := leaf.(*kerr.Error)
		if !ok || ClassifyMetaCode(t, ke.Code) != Failed {
			outcome = Unknown
		}
	})
	return outcome
}

// ClassifyMetaCode judges a Kafka error code from the answer to a
// metadata request of type t (one topic's error of CreateTopics or
// DeleteTopics). 0 succeeded.
//
// A broker forwards CreateTopics and DeleteTopics to the active controller
// (KRaft's ForwardingManager; Sluice's nodes do the same) and relays its
// answer. Apache Kafka's QuorumController validates a request against its
// in-memory state and answers errors of validation without writing a
// record: those are definite. Once it has written records it answers only
// when they commit; if it loses leadership first it fails every pending
// request with NOT_CONTROLLER, and a forwarding broker whose request
// timed out answers REQUEST_TIMED_OUT, although the records may still
// commit under the next leader: both are unknown, as is
// UNKNOWN_SERVER_ERROR and any code not listed here.
//
// Definite, create: TOPIC_ALREADY_EXISTS (the name is taken: a read of the
// metadata, see MetaModel), INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
// INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG,
// POLICY_VIOLATION, THROTTLING_QUOTA_EXCEEDED (the controller's mutation
// quota is charged before it generates records). Definite, delete:
// UNKNOWN_TOPIC_OR_PARTITION (no such topic: a read), UNKNOWN_TOPIC_ID,
// TOPIC_DELETION_DISABLED, INVALID_TOPIC_EXCEPTION (an internal topic),
// THROTTLING_QUOTA_EXCEEDED. Definite, add partitions: INVALID_PARTITIONS
// (the topic has that many already: a read), UNKNOWN_TOPIC_OR_PARTITION (no
// such topic: a read), INVALID_REPLICA_ASSIGNMENT. Definite, config
// change: UNKNOWN_TOPIC_OR_PARTITION (a read), INVALID_CONFIG,
// POLICY_VIOLATION. Definite for all: INVALID_REQUEST,
// UNSUPPORTED_VERSION, and the authorization failures, checked before the
// request reaches the controller.
//
// For a describe every error code is definite (a read that got no answer
// changed nothing); UNKNOWN_TOPIC_OR_PARTITION is not a failure of a
// describe but its answer "absent" (MetaHistory.Complete records it so).
func ClassifyMetaCode(t MetaType, code int16) Outcome {
	if code == 0 {
		return Succeeded
	}
	switch code {
	case kerr.InvalidRequest.Code,
		kerr.UnsupportedVersion.Code,
		kerr.TopicAuthorizationFailed.Code,
		kerr.ClusterAuthorizationFailed.Code,
		kerr.ThrottlingQuotaExceeded.Code,
		kerr.InvalidTopicException.Code:
		return Failed
	}
	switch t {
	case MetaCreate:
		switch code {
		case kerr.TopicAlreadyExists.Code,
			kerr.InvalidPartitions.Code,
			kerr.InvalidReplicationFactor.Code,
			kerr.InvalidReplicaAssignment.Code,
			kerr.InvalidConfig.Code,
			kerr.PolicyViolation.Code:
			return Failed
		}
	case MetaDelete:
		switch code {
		case kerr.UnknownTopicOrPartition.Code,
			kerr.UnknownTopicID.Code,
			kerr.TopicDeletionDisabled.Code:
			return Failed
		}
	case MetaAddPartitions:
		switch code {
		case kerr.InvalidPartitions.Code,
			kerr.UnknownTopicOrPartition.Code,
			kerr.InvalidReplicaAssignment.Code:
			return Failed
		}
	case MetaAlterConfig:
		switch code {
		case kerr.UnknownTopicOrPartition.Code,
			kerr.InvalidConfig.Code,
			kerr.PolicyViolation.Code:
			return Failed
		}
	case MetaDescribe, MetaDescribeConfig:
		return Failed
	}
	return Unknown
}

// refusalCode reports whether code, ending an operation of type t, is a
// definite refusal that says something of the metadata: the name exists
// (a create's TOPIC_ALREADY_EXISTS), does not (a delete's or an add's
// UNKNOWN_TOPIC_OR_PARTITION), or has at least the partitions asked for
// (an add's INVALID_PARTITIONS, for a count within the broker's limit of
// maxReadPartitions: above it the refusal says nothing of the topic). Other definite failures say nothing and are
// dropped, UNKNOWN_TOPIC_ID among them: a node that resolves the name to
// an id from its own image before it forwards (as Sluice's do; Kafka's
// controller resolves names itself) may resolve it to an incarnation
// deleted since, while the name lives on under a new id.
func refusalCode(t MetaType, code int16) bool {
	switch t {
	case MetaCreate:
		return code == kerr.TopicAlreadyExists.Code
	case MetaDelete:
		return code == kerr.UnknownTopicOrPartition.Code
	case MetaAddPartitions:
		return code == kerr.UnknownTopicOrPartition.Code || code == kerr.InvalidPartitions.Code
	case MetaAlterConfig:
		return code == kerr.UnknownTopicOrPartition.Code
	}
	return false
}

// maxReadPartitions is the largest count an add-partitions refusal
// INVALID_PARTITIONS is a read of: a topic may have at most that many
// partitions on Sluice (and on Kafka, which refuses more through its
// policies), so a larger count is refused whatever the topic has.
const maxReadPartitions = 10000

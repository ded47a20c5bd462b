package jepsen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"no error", nil, Succeeded},
		{"NOT_ENOUGH_REPLICAS is checked before the append", kerr.NotEnoughReplicas, Failed},
		{"MESSAGE_TOO_LARGE", kerr.MessageTooLarge, Failed},
		{"INVALID_REQUIRED_ACKS", kerr.InvalidRequiredAcks, Failed},
		{"UNKNOWN_TOPIC_OR_PARTITION", kerr.UnknownTopicOrPartition, Failed},
		{"CORRUPT_MESSAGE", kerr.CorruptMessage, Failed},
		{"INVALID_PRODUCER_EPOCH", kerr.InvalidProducerEpoch, Failed},
		{"OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.OutOfOrderSequenceNumber, Failed},
		{"a fetch's OFFSET_OUT_OF_RANGE", kerr.OffsetOutOfRange, Failed},
		{"wrapped with context", fmt.Errorf("produce t-0: %w", kerr.MessageTooLarge), Failed},
		{"all leaves definite", errors.Join(kerr.NotEnoughReplicas, kerr.MessageTooLarge), Failed},

		{"NOT_ENOUGH_REPLICAS_AFTER_APPEND is after the append", kerr.NotEnoughReplicasAfterAppend, Unknown},
		{"REQUEST_TIMED_OUT waiting for the ISR", kerr.RequestTimedOut, Unknown},
		{"NOT_LEADER_OR_FOLLOWER, before or after the append", kerr.NotLeaderForPartition, Unknown},
		{"KAFKA_STORAGE_ERROR", kerr.KafkaStorageError, Unknown},
		{"DUPLICATE_SEQUENCE_NUMBER means it is already there", kerr.DuplicateSequenceNumber, Unknown},
		{"UNKNOWN_SERVER_ERROR", kerr.UnknownServerError, Unknown},
		{"NETWORK_EXCEPTION", kerr.NetworkException, Unknown},
		{"connection lost", io.EOF, Unknown},
		{"client deadline", context.DeadlineExceeded, Unknown},
		{"an unrecognised error", errors.New("boom"), Unknown},
		{"one leaf unknown", errors.Join(kerr.NotEnoughReplicas, kerr.RequestTimedOut), Unknown},
		{"franz-go timeout with a definite last error", fmt.Errorf("%w, last err: %w", kgo.ErrRecordTimeout, kerr.NotEnoughReplicas), Unknown},
		{"franz-go retries exhausted", kgo.ErrRecordRetries, Unknown},

		{"not sent", NotSent(io.EOF), Failed},
		{"not sent, wrapped", fmt.Errorf("dial: %w", NotSent(context.DeadlineExceeded)), Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Fatalf("Classify(%v) = %s, want %s", tt.err, got, tt.want)
			}
		})
	}
}

// The set of definite codes, as a specification: a code moves into it only
// with a reason in ClassifyCode.
func TestClassifyCodeDefiniteSet(t *testing.T) {
	var definite []string
	for code := int16(-1); code < 200; code++ {
		if ClassifyCode(code) == Failed {
			definite = append(definite, kerr.TypedErrorForCode(code).Message)
		}
	}
	want := []string{
		"OFFSET_OUT_OF_RANGE", "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
		"MESSAGE_TOO_LARGE", "INVALID_TOPIC_EXCEPTION", "RECORD_LIST_TOO_LARGE", "NOT_ENOUGH_REPLICAS",
		"INVALID_REQUIRED_ACKS", "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
		"INVALID_TIMESTAMP", "UNSUPPORTED_VERSION", "INVALID_REQUEST", "UNSUPPORTED_FOR_MESSAGE_FORMAT",
		"OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE",
		"INVALID_PRODUCER_ID_MAPPING", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "UNKNOWN_PRODUCER_ID",
		"UNSUPPORTED_COMPRESSION_TYPE", "INVALID_RECORD", "PRODUCER_FENCED", "UNKNOWN_TOPIC_ID",
	}
	if !slices.Equal(definite, want) {
		t.Fatalf("definite codes:\n got %v\nwant %v", definite, want)
	}
	if ClassifyCode(0) != Succeeded {
		t.Fatal("code 0 is success")
	}
}

func TestAfterRetries(t *testing.T) {
	tests := []struct {
		attempts []Outcome
		want     Outcome
	}{
		{nil, Unknown},
		{[]Outcome{Failed}, Failed},
		{[]Outcome{Failed, Failed}, Failed},
		{[]Outcome{Unknown, Failed}, Unknown}, // the first may have landed
		{[]Outcome{Unknown, Succeeded}, Succeeded},
		{[]Outcome{Failed, Unknown}, Unknown},
	}
	for _, tt := range tests {
		if got := AfterRetries(tt.attempts...); got != tt.want {
			t.Errorf("AfterRetries(%v) = %s, want %s", tt.attempts, got, tt.want)
		}
	}
}

func TestCompleteRecordsTheClassification(t *testing.T) {
	h := NewHistory()
	a := h.InvokeProduce(0, t0, true, "a")
	b := h.InvokeProduce(0, t0, true, "b")
	h.Complete(a, fmt.Errorf("attempt 1: %w", kerr.NotEnoughReplicas))
	h.Complete(b, kerr.NotEnoughReplicasAfterAppend)
	es := h.Events()
	if es[2].Kind != KindFail || es[2].Code != kerr.NotEnoughReplicas.Code {
		t.Errorf("NOT_ENOUGH_REPLICAS recorded as %s code %d", es[2].Kind, es[2].Code)
	}
	if es[3].Kind != KindInfo || es[3].Code != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Errorf("NOT_ENOUGH_REPLICAS_AFTER_APPEND recorded as %s code %d", es[3].Kind, es[3].Code)
	}
	if h.Err() != nil {
		t.Fatal(h.Err())
	}
}

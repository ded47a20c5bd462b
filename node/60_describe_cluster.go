package node

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster, versions 0-2.
//
//   - The cluster id, the registered brokers, and the controller: this
//     broker for now, as in Metadata (a Kafka broker likewise names one of
//     the brokers, since clients cannot reach KRaft controllers).
//   - EndpointType (v1+): this is a broker endpoint, so asking for
//     controllers (2) gets MISMATCHED_ENDPOINT_TYPE and an unknown type
//     UNSUPPORTED_ENDPOINT_TYPE; v0 gets INVALID_REQUEST for either, as in
//     Kafka.
//   - Fenced brokers are left out, as Metadata leaves them out (Kafka's
//     getAliveBrokerNodes), unless IncludeFencedBrokers (v2+) asks for
//     them; then each says IsFenced.
//   - Cluster authorized operations when asked; with no ACLs yet, every
//     operation is allowed.
func (b *Broker) handleDescribeCluster(r *request) {
	req := r.body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	const endpointBrokers, endpointControllers = 1, 2
	if req.EndpointType != endpointBrokers {
		err := kerr.UnsupportedEndpointType
		msg := fmt.Sprintf("Unsupported endpoint type %d", req.EndpointType)
		if req.EndpointType == endpointControllers {
			err = kerr.MismatchedEndpointType
			msg = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
		}
		if req.Version == 0 {
			err = kerr.InvalidRequest
		}
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		r.respond(resp)
		return
	}
	resp.EndpointType = endpointBrokers
	resp.ClusterID = b.image.ClusterID
	resp.ControllerID = b.controllerIDForClients()
	for _, id := range b.image.BrokerIDs() {
		br := b.image.Brokers[id]
		if br.Fenced && !req.IncludeFencedBrokers {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = br.ID, br.Host, br.Port, rackOf(br.Rack)
		rb.IsFenced = br.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperationsAll
	}
	r.respond(resp)
}

package node

import "github.com/twmb/franz-go/pkg/kmsg"

// IncrementalAlterConfigs, versions 0-1.
//
// Each config is SET, DELETEd (back to its default), or, for list configs
// (cleanup.policy), has items APPENDed or SUBTRACTed; APPEND or SUBTRACT on
// another config is INVALID_CONFIG. TOPIC resources are altered and BROKER
// resources refused, with the checks and errors described in
// alterconfigs.go. BROKER_LOGGER gets INVALID_REQUEST: Sluice cannot change
// its log level at runtime. ValidateOnly runs every check and changes
// nothing. The answer comes once the change is committed; results follow
// the request's order, with ErrorMessage on failure.
func (b *Broker) handleIncrementalAlterConfigs(r *request) {
	req := r.body.(*kmsg.IncrementalAlterConfigsRequest)
	resources := make([]alterResource, len(req.Resources))
	for i, rr := range req.Resources {
		res := alterResource{typ: rr.ResourceType, name: rr.ResourceName}
		for _, c := range rr.Configs {
			res.ops = append(res.ops, alterOp{key: c.Name, op: c.Op, value: c.Value})
		}
		resources[i] = res
	}
	b.alterConfigs(resources, req.ValidateOnly, func() { b.handleIncrementalAlterConfigs(r) }, func(results []alterResult) {
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for i, rr := range req.Resources {
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode, res.ErrorMessage = results[i].codeAndMessage()
			resp.Resources = append(resp.Resources, res)
		}
		r.respond(resp)
	})
}

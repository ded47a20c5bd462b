package node

import "github.com/twmb/franz-go/pkg/kmsg"

// AlterConfigs, versions 0-2: the legacy form, which replaces a resource's
// whole set of configs with the one given (a config not listed returns to
// its default).
//
// TOPIC resources are altered and BROKER resources refused, with the checks
// and errors described in alterconfigs.go. BROKER_LOGGER, which only
// IncrementalAlterConfigs knows, gets INVALID_REQUEST ("Unknown resource
// type 8"), as in Kafka. ValidateOnly runs every check and changes nothing.
// The answer comes once the change is committed; results follow the
// request's order, with ErrorMessage on failure.
func (b *Broker) handleAlterConfigs(r *request) {
	req := r.body.(*kmsg.AlterConfigsRequest)
	resources := make([]alterResource, len(req.Resources))
	for i, rr := range req.Resources {
		res := alterResource{typ: rr.ResourceType, name: rr.ResourceName, replace: true}
		for _, c := range rr.Configs {
			res.ops = append(res.ops, alterOp{key: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value})
		}
		resources[i] = res
	}
	b.alterConfigs(resources, req.ValidateOnly, func() { b.handleAlterConfigs(r) }, func(results []alterResult) {
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for i, rr := range req.Resources {
			res := kmsg.NewAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode, res.ErrorMessage = results[i].codeAndMessage()
			resp.Resources = append(resp.Resources, res)
		}
		r.respond(resp)
	})
}

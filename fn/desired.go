package main

import (
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// rewrote records that this run changed the spec of the composed resource
// resName beyond spec.managementPolicies, so its response must encode the
// whole resource again.
func (r *run) rewrote(resName string) {
	if r.rewritten == nil {
		r.rewritten = map[string]bool{}
	}
	r.rewritten[resName] = true
}

// setDesired replaces the response's desired composed resources, keeping the
// Ready flags and connection details earlier steps set.
//
// Encoding every desired resource back into a protobuf Struct costs as much
// as the rest of the function (a spec holds most of an object). A resource
// that came in with the request and whose spec this run left alone, apart
// from spec.managementPolicies, is answered with the request's own Struct
// values: only metadata and spec.managementPolicies are encoded, into
// shallow copies, so the request itself is never modified. Every other
// resource, rewritten, kept against deletion or created here, is encoded
// whole.
func setDesired(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, out map[resource.Name]*resource.DesiredComposed, rewritten map[string]bool) error {
	in := req.GetDesired().GetResources()
	// rsp.Desired is the request's State (response.To shares it): answer with
	// a State of our own.
	desired := &fnv1.State{Composite: rsp.GetDesired().GetComposite(), Resources: make(map[string]*fnv1.Resource, len(out))}
	rsp.Desired = desired
	whole := map[resource.Name]*resource.DesiredComposed{}
	for n, d := range out {
		k, ok := in[string(n)]
		if !ok || rewritten[string(n)] {
			whole[n] = d
			continue
		}
		s, ok, err := patched(k.GetResource(), d.Resource.Object)
		if err != nil {
			return errors.Wrapf(err, "cannot encode desired composed resource %q", n)
		}
		if !ok {
			whole[n] = d
			continue
		}
		desired.Resources[string(n)] = &fnv1.Resource{Resource: s, Ready: k.GetReady(), ConnectionDetails: k.GetConnectionDetails()}
	}
	if err := response.SetDesiredComposedResources(rsp, whole); err != nil {
		return err
	}
	for n := range whole {
		if k, ok := in[string(n)]; ok {
			r := desired.Resources[string(n)]
			r.Ready = k.GetReady()
			r.ConnectionDetails = k.GetConnectionDetails()
		}
	}
	return nil
}

// patched is in with metadata and spec.managementPolicies taken from obj,
// sharing every other value with in. ok is false when in's shape does not
// allow that (obj has a spec in has not), and the caller encodes obj whole.
func patched(in *structpb.Struct, obj map[string]any) (*structpb.Struct, bool, error) {
	fields := maps.Clone(in.GetFields())
	if fields == nil {
		return nil, false, nil
	}
	if md, ok := obj["metadata"]; ok {
		v, err := structpb.NewValue(md)
		if err != nil {
			return nil, false, errors.Wrap(err, "cannot encode metadata")
		}
		fields["metadata"] = v
	}
	spec, _ := obj["spec"].(map[string]any)
	mp, set := spec["managementPolicies"]
	inSpec := fields["spec"].GetStructValue()
	switch {
	case !set && (spec == nil) == (fields["spec"] == nil):
	case !set || inSpec == nil:
		return nil, false, nil
	default:
		v, err := structpb.NewValue(mp)
		if err != nil {
			return nil, false, errors.Wrap(err, "cannot encode spec.managementPolicies")
		}
		sf := maps.Clone(inSpec.GetFields())
		if sf == nil {
			sf = map[string]*structpb.Value{}
		}
		sf["managementPolicies"] = v
		fields["spec"] = structpb.NewStructValue(&structpb.Struct{Fields: sf})
	}
	return &structpb.Struct{Fields: fields}, true, nil
}

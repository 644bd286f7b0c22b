package compose

import (
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// stamp is what the function adds to the metadata of a composed resource
// it gates or records: its annotations (the pipeline's and Kausality's) and,
// when gated, the gated label. It is kept beside the resource, not written
// into it, so that a resource answered with the request's own Struct values
// has its metadata encoded once, from these strings.
type stamp struct {
	annotations map[string]string
	gated       bool
}

// An answer is what the function emits for one composed resource: the
// resource, whether this run changed its spec beyond
// spec.managementPolicies (so it is encoded whole), and its stamp (nil:
// none).
type answer struct {
	*resource.DesiredComposed
	rewritten bool
	stamp     *stamp
}

// apply writes s into obj's metadata.
func (s stamp) apply(obj map[string]any) {
	u := &unstructured.Unstructured{Object: obj}
	u.SetAnnotations(s.annotations)
	if s.gated {
		u.SetLabels(s.labels(obj))
	}
}

// labels are obj's labels with the gated label.
func (s stamp) labels(obj map[string]any) map[string]string {
	labels := (&unstructured.Unstructured{Object: obj}).GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelGated] = "true"
	return labels
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
func setDesired(rsp *fnv1.RunFunctionResponse, req *fnv1.RunFunctionRequest, out map[resource.Name]answer) error {
	in := req.GetDesired().GetResources()
	// rsp.Desired is the request's State (response.To shares it): answer with
	// a State of our own.
	desired := &fnv1.State{Composite: rsp.GetDesired().GetComposite(), Resources: make(map[string]*fnv1.Resource, len(out))}
	rsp.Desired = desired
	whole := map[resource.Name]*resource.DesiredComposed{}
	for n, a := range out {
		d, st := a.DesiredComposed, a.stamp
		var s *structpb.Struct
		patchable := false // answered with the request's own values
		k, ok := in[string(n)]
		if ok && !a.rewritten {
			var err error
			if s, patchable, err = patched(k.GetResource(), d.Resource.Object, st); err != nil {
				return errors.Wrapf(err, errFmtEncodeDesiredComposedResource, n)
			}
		}
		if !patchable {
			if st != nil {
				st.apply(d.Resource.Object)
			}
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
// and st (nil: none) applied to the metadata, sharing every other value
// with in. ok is false when in's shape does not allow that (obj has a spec
// in has not), and the caller encodes obj whole.
func patched(in *structpb.Struct, obj map[string]any, st *stamp) (*structpb.Struct, bool, error) {
	fields := maps.Clone(in.GetFields())
	if fields == nil {
		return nil, false, nil
	}
	md, hasMetadata := obj["metadata"]
	switch {
	case st != nil:
		m, _ := md.(map[string]any)
		v, err := stampedMetadata(m, obj, *st)
		if err != nil {
			return nil, false, err
		}
		fields["metadata"] = v
	case hasMetadata:
		v, err := structpb.NewValue(md)
		if err != nil {
			return nil, false, errors.Wrap(err, errEncodeMetadata)
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
			return nil, false, errors.Wrap(err, errEncodeSpecManagementPolicies)
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

// stampedMetadata encodes md, obj's metadata, with st applied: what
// structpb.NewValue gives for md after st.apply, without building the
// annotations and labels as maps of interfaces first.
func stampedMetadata(md, obj map[string]any, st stamp) (*structpb.Value, error) {
	fs := make(map[string]*structpb.Value, len(md)+2)
	for k, v := range md {
		if k == "annotations" || (k == "labels" && st.gated) {
			continue
		}
		e, err := structpb.NewValue(v)
		if err != nil {
			return nil, errors.Wrapf(err, errFmtEncodeMetadataField, k)
		}
		fs[k] = e
	}
	if st.annotations != nil {
		fs["annotations"] = stringsValue(st.annotations)
	}
	if st.gated {
		fs["labels"] = stringsValue(st.labels(obj))
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: fs}), nil
}

// stringsValue is m as a protobuf Struct of strings. Its values are
// allocated together, two allocations instead of two per value: every
// gated resource's answer carries a Struct of annotations.
func stringsValue(m map[string]string) *structpb.Value {
	fs := make(map[string]*structpb.Value, len(m))
	vs := make([]structpb.Value, len(m))
	ss := make([]structpb.Value_StringValue, len(m))
	i := 0
	for k, v := range m {
		ss[i].StringValue = v
		vs[i].Kind = &ss[i]
		fs[k] = &vs[i]
		i++
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: fs})
}

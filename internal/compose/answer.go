package compose

import (
	"maps"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/gate"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// An answer is what the function emits for one composed resource: the
// resource as the pipeline wants it, the spec this run answers with instead
// when it kept observed values in it (rewritten; encoded whole), and its
// stamp (nil: none).
type answer struct {
	*resource.DesiredComposed
	body  body
	stamp *stamp
}

// object is the resource as answered: the pipeline's with the run's spec
// and the stamp applied. The pipeline's object is not written: the top
// level, metadata and spec are copied before anything is set in them.
func (a answer) object() (map[string]any, error) {
	st := a.stamp
	if st != nil && st.closing != nil {
		return closingOnly(a.Resource.Object, st.closing, st.policies)
	}
	obj := withSpec(a.Resource.Object, a.body.rewritten, a.body.whole, a.body.spec)
	if st == nil {
		return obj, nil
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		obj["metadata"] = maps.Clone(md)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAnnotations(st.annotations)
	if st.gated {
		u.SetLabels(st.labels(obj))
	}
	if st.policies == nil {
		return obj, nil
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		obj["spec"] = maps.Clone(spec)
	}
	if err := setManagementPolicies(obj, st.policies); err != nil {
		return nil, errors.Wrapf(err, errFmtSetField, gate.PathManagementPolicies, ref(obj))
	}
	return obj, nil
}

// closingOnly is desired's top level with observed's spec, labels and
// annotations, and ps as its gate: Crossplane's server-side apply of it
// changes nothing of the stored resource but spec.managementPolicies (every
// field it names holds the stored value, and none is left out that the
// stored resource has), which is what the API server admits without the
// provider (provider/policycontroller OnlyClosing).
func closingOnly(desired, observed map[string]any, ps []string) (map[string]any, error) {
	out := maps.Clone(desired)
	md, _ := desired["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	stored, _ := observed["metadata"].(map[string]any)
	for _, k := range []string{"annotations", "labels"} {
		delete(md, k)
		if v, ok := stored[k]; ok {
			md[k] = v
		}
	}
	out["metadata"] = md
	spec, _ := observed["spec"].(map[string]any)
	out["spec"] = maps.Clone(spec)
	if err := setManagementPolicies(out, ps); err != nil {
		return nil, errors.Wrapf(err, errFmtSetField, gate.PathManagementPolicies, ref(out))
	}
	return out, nil
}

// withSpec is a copy of obj's top level with spec in place of its own when
// rewritten (an absent spec when spec is nil), shared by a change's view of
// what it leaves and the answer built from it. whole: spec is the
// resource's content (see content), in place of every field of it.
func withSpec(obj map[string]any, rewritten, whole bool, spec any) map[string]any {
	out := maps.Clone(obj)
	if !rewritten {
		return out
	}
	if whole {
		for k := range policy.Body(obj) {
			delete(out, k)
		}
		b, _ := spec.(map[string]any)
		for k, v := range b {
			if k != "metadata" {
				out[k] = v
			}
		}
		out["metadata"] = withOwnMetadata(obj["metadata"], b["metadata"])
		return out
	}
	out["spec"] = spec
	if spec == nil {
		delete(out, "spec")
	}
	return out
}

// withOwnMetadata is a copy of md, an object's metadata, with the labels
// and annotations of own, a policy.Content's metadata, in place of its
// own (policy.WithOwn).
func withOwnMetadata(md, own any) map[string]any {
	m, _ := md.(map[string]any)
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	o, _ := own.(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		cur, _ := out[field].(map[string]any)
		strs := make(map[string]string, len(cur))
		for k, v := range cur {
			if s, ok := v.(string); ok {
				strs[k] = s
			}
		}
		merged := policy.WithOwn(strs, o[field])
		if len(merged) == 0 {
			delete(out, field)
			continue
		}
		l := make(map[string]any, len(merged))
		for k, v := range merged {
			l[k] = v
		}
		out[field] = l
	}
	return out
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
// whole (answer.object).
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
		if ok && !a.body.rewritten && (st == nil || st.closing == nil) {
			var err error
			if s, patchable, err = patched(k.GetResource(), d.Resource.Object, st); err != nil {
				return errors.Wrapf(err, errFmtEncodeDesiredComposedResource, n)
			}
		}
		if !patchable {
			obj, err := a.object()
			if err != nil {
				return errors.Wrapf(err, errFmtEncodeDesiredComposedResource, n)
			}
			whole[n] = &resource.DesiredComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: obj}}, Ready: d.Ready}
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

// patched is in with metadata taken from obj and st (nil: none) applied to
// it and to spec.managementPolicies, sharing every other value with in. ok
// is false when in's shape does not allow that (its spec is not an
// object), and the caller encodes the answer whole.
func patched(in *structpb.Struct, obj map[string]any, st *stamp) (*structpb.Struct, bool, error) {
	fields := maps.Clone(in.GetFields())
	if fields == nil {
		return nil, false, nil
	}
	md, hasMetadata := obj["metadata"]
	switch {
	case st != nil:
		m, _ := md.(map[string]any)
		v, err := stampedMetadata(m, *st)
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
	if st == nil || st.policies == nil {
		return &structpb.Struct{Fields: fields}, true, nil
	}
	inSpec := fields["spec"].GetStructValue()
	if inSpec == nil && fields["spec"] != nil {
		return nil, false, nil
	}
	sf := maps.Clone(inSpec.GetFields())
	if sf == nil {
		sf = map[string]*structpb.Value{}
	}
	sf["managementPolicies"] = stringsList(st.policies)
	fields["spec"] = structpb.NewStructValue(&structpb.Struct{Fields: sf})
	return &structpb.Struct{Fields: fields}, true, nil
}

// stampedMetadata encodes md, obj's metadata, with st applied: what
// structpb.NewValue gives for md after answer.object, without building the
// annotations and labels as maps of interfaces first.
func stampedMetadata(md map[string]any, st stamp) (*structpb.Value, error) {
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
		fs["labels"] = gatedLabelsValue(md)
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: fs}), nil
}

// stringsList is ss as a protobuf list of strings, its values allocated
// together as stringsValue's: every gated resource's answer carries its
// gate as one.
func stringsList(ss []string) *structpb.Value {
	ps := make([]*structpb.Value, len(ss))
	vs := make([]structpb.Value, len(ss))
	strs := make([]structpb.Value_StringValue, len(ss))
	for i, s := range ss {
		strs[i].StringValue = s
		vs[i].Kind = &strs[i]
		ps[i] = &vs[i]
	}
	return structpb.NewListValue(&structpb.ListValue{Values: ps})
}

// gatedLabelsValue is stringsValue(stamp.labels(obj)) for md, obj's
// metadata, without the map of labels in between: unstructured's
// GetLabels of obj (none when they do not all read as strings, a null read
// as "") with the gated label.
func gatedLabelsValue(md map[string]any) *structpb.Value {
	labels, _ := md["labels"].(map[string]any)
	n := len(labels) + 1
	for _, v := range labels {
		switch v.(type) {
		case string, nil:
			continue
		}
		// GetLabels reads none.
		labels, n = nil, 1
		break
	}
	if _, ok := labels[v1alpha1.LabelGated]; ok {
		n--
	}
	fs := make(map[string]*structpb.Value, n)
	vs := make([]structpb.Value, n)
	ss := make([]structpb.Value_StringValue, n)
	i := 0
	put := func(k, v string) {
		ss[i].StringValue = v
		vs[i].Kind = &ss[i]
		fs[k] = &vs[i]
		i++
	}
	for k, v := range labels {
		if k == v1alpha1.LabelGated {
			continue
		}
		s, _ := v.(string)
		put(k, s)
	}
	put(v1alpha1.LabelGated, "true")
	return structpb.NewStructValue(&structpb.Struct{Fields: fs})
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

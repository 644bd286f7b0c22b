package policy

import "strings"

// Content is what Kausality compares, records and withholds of a composed
// resource of a kind without a gate (ClassUnmanaged): its Body and, under
// "metadata", the labels and annotations that are the pipeline's to set
// (OwnMetadataKey). Controllers act on a Service's, an Ingress's, a
// ServiceAccount's or a Deployment's metadata as on its body (a load
// balancer's scheme, a DNS name, an IAM role), so for these kinds a change
// of them needs a cause like one of the body (docs/FIELDS.md, "Composed
// Kubernetes kinds").
func Content(obj map[string]any) map[string]any {
	out := Body(obj)
	md, _ := obj["metadata"].(map[string]any)
	own := map[string]any{}
	for _, field := range []string{"labels", "annotations"} {
		m, _ := md[field].(map[string]any)
		kept := map[string]any{}
		for k, v := range m {
			if OwnMetadataKey(k) {
				kept[k] = v
			}
		}
		if len(kept) > 0 {
			own[field] = kept
		}
	}
	if len(own) > 0 {
		out["metadata"] = own
	}
	return out
}

// AlignContent gives each of two Contents (observed and desired, each
// freshly made by Content) an empty labels or annotations map where only
// the other has one: adding the first annotation is then an insert of
// that key, which a rule can name, not of the whole map, and a Content
// without any records no empty map.
func AlignContent(a, b map[string]any) {
	am, _ := a["metadata"].(map[string]any)
	bm, _ := b["metadata"].(map[string]any)
	for _, field := range []string{"labels", "annotations"} {
		_, inA := am[field]
		_, inB := bm[field]
		switch {
		case inA && !inB:
			bm = ensure(b, bm)
			bm[field] = map[string]any{}
		case inB && !inA:
			am = ensure(a, am)
			am[field] = map[string]any{}
		}
	}
}

// ensure is c's metadata md, made and set when c has none.
func ensure(c, md map[string]any) map[string]any {
	if md == nil {
		md = map[string]any{}
		c["metadata"] = md
	}
	return md
}

// OwnMetadataKey reports whether a label or annotation key of a composed
// resource is the pipeline's to set, and so compared: every key but those
// in Crossplane's domain (crossplane.io and its subdomains: Crossplane's
// bookkeeping, such as crossplane.io/composite and
// crossplane.io/composition-resource-name) and in Kausality's
// (kausality.io).
func OwnMetadataKey(k string) bool {
	domain, _, ok := strings.Cut(k, "/")
	if !ok {
		return true
	}
	for _, d := range []string{"crossplane.io", "kausality.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return false
		}
	}
	return true
}

// WithOwn is current (a composed resource's labels or annotations) with
// its own keys (OwnMetadataKey) replaced by those of own, the matching
// field of a Content's metadata: what a change that kept some of them as
// observed leaves. Keys outside the pipeline's stay as they are.
func WithOwn(current map[string]string, own any) map[string]string {
	out := make(map[string]string, len(current))
	for k, v := range current {
		if !OwnMetadataKey(k) {
			out[k] = v
		}
	}
	m, _ := own.(map[string]any)
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

package derivation

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxPasses bounds how often an experiment renders one XR with what the
// last render composed fed back as observed: a pipeline that composes
// something new on every pass never settles.
const MaxPasses = 8

// Observed are the composed resources a render desired, as a cluster
// reports them once created and ready: named, Ready and Synced, with
// status.atProvider echoing spec.forProvider and an id. Fed back to the
// next render of the same XR they let a pipeline compose what it holds
// back until earlier resources exist or are ready (function-sequencer
// after function-auto-ready, a template's condition, a patch that reads
// another resource's status), as a creation on a cluster does pass after
// pass.
func Observed(xr map[string]any, desired []*unstructured.Unstructured) []*unstructured.Unstructured {
	x := &unstructured.Unstructured{Object: xr}
	out := make([]*unstructured.Unstructured, 0, len(desired))
	for _, d := range desired {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(d.Object)}
		if u.GetName() == "" {
			u.SetName(dns1123(x.GetName() + "-" + u.GetAnnotations()[AnnotationCompositionResourceName]))
		}
		if u.GetNamespace() == "" && x.GetNamespace() != "" {
			u.SetNamespace(x.GetNamespace())
		}
		fp, managed, _ := unstructured.NestedMap(u.Object, "spec", "forProvider")
		atProvider := map[string]any{}
		if managed {
			atProvider = fp
		}
		if _, ok := atProvider["id"]; !ok {
			atProvider["id"] = u.GetName()
		}
		if _, ok := atProvider["arn"]; !ok && strings.Contains(u.GroupVersionKind().Group, "aws.") {
			atProvider["arn"] = fmt.Sprintf("arn:aws:%s:::%s", strings.ToLower(u.GetKind()), u.GetName())
		}
		status := map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}}
		if managed {
			status["atProvider"] = atProvider
		}
		u.Object["status"] = status
		out = append(out, u)
	}
	return out
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dns1123 is s as a valid object name.
func dns1123(s string) string {
	s = strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 63 {
		s = strings.TrimRight(s[:63], "-")
	}
	return s
}

// Settled says whether a render composed exactly the resources the one
// before it did, by composition resource name: then feeding it back again
// composes nothing new.
func Settled(before, after []*unstructured.Unstructured) bool {
	names := func(objs []*unstructured.Unstructured) []string {
		out := make([]string, 0, len(objs))
		for _, u := range objs {
			out = append(out, u.GetAnnotations()[AnnotationCompositionResourceName])
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(names(before), names(after))
}

package policy

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/derive"
)

// resourceGraphs are the kro ResourceGraphDefinitions among objs.
func resourceGraphs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if derive.IsResourceGraph(u) {
			out = append(out, u)
		}
	}
	return out
}

// deriveGraphs derives a policy from each ResourceGraphDefinition, with
// the same options as a Composition's. Kinds of Kubernetes' own groups
// resolve first, as having no external resource.
func deriveGraphs(graphs []*unstructured.Unstructured, o DeriveOptions, subjects []v1alpha1.Subject, deleting derive.Deleting, res derive.Resolver, schemaOf func(schema.GroupVersionKind) *derive.Schema) ([][]byte, error) {
	docs := make([][]byte, 0, len(graphs))
	for _, g := range graphs {
		m, err := derive.ReadGraph(g)
		if err != nil {
			return nil, err
		}
		s := schemaOf(m.XR)
		if s == nil {
			// kro generates the instance's CRD from the graph, and every
			// field a template references is set there, so no field's
			// presence decides a verb: an empty schema says so without
			// the note that no XRD was given.
			s = &derive.Schema{}
		}
		r, err := derive.Derive(m, derive.Options{
			Name: o.Name, Subjects: subjects, Deleting: deleting, DeletionProtection: o.DeletionProtection,
			Resolver: chain{derive.KubernetesKinds{}, res}, XRSchema: s,
		})
		if err != nil {
			return nil, errors.Wrapf(err, "ResourceGraphDefinition %s", g.GetName())
		}
		b, err := derive.Render(r)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	return docs, nil
}

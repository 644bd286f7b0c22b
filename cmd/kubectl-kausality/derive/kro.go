package derive

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/derivation"
)

// resourceGraphs are the kro ResourceGraphDefinitions among objs.
func resourceGraphs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if derivation.IsResourceGraph(u) {
			out = append(out, u)
		}
	}
	return out
}

// deriveGraphs derives a policy from each ResourceGraphDefinition, with
// the same options as a Composition's. Kinds of Kubernetes' own groups
// resolve first, as having no external resource.
func deriveGraphs(graphs []*unstructured.Unstructured, o Options, subjects []v1alpha1.Subject, deleting derivation.Deleting, res derivation.Resolver, schemaOf func(schema.GroupVersionKind) *derivation.Schema) ([][]byte, error) {
	docs := make([][]byte, 0, len(graphs))
	for _, g := range graphs {
		m, err := derivation.ReadGraph(g)
		if err != nil {
			return nil, err
		}
		s := schemaOf(m.XR)
		if s == nil {
			// kro generates the instance's CRD from the graph, and every
			// field a template references is set there, so no field's
			// presence decides a verb: an empty schema says so without
			// the note that no XRD was given.
			s = &derivation.Schema{}
		}
		r, err := derivation.Derive(m, derivation.Options{
			Name: o.Name, Subjects: subjects, Deleting: deleting, DeletionProtection: o.DeletionProtection,
			Mode: v1alpha1.Mode(o.Mode), Resolver: chain{derivation.KubernetesKinds{}, res}, XRSchema: s,
		})
		if err != nil {
			return nil, errors.Wrapf(err, "ResourceGraphDefinition %s", g.GetName())
		}
		b, err := derivation.Render(r)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	return docs, nil
}

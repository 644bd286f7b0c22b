package derivation

import (
	"encoding/json"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Kind is what the API server (or a CRD) says about a composed kind.
type Kind struct {
	// Resource is the kind's plural, as policy targets name it.
	Resource string
	// Class says whether the kind has an external resource: a policy
	// grants External verbs for a managed kind only (policy.ClassOf).
	Class policy.Class
}

// A Resolver tells the plural of a composed kind and whether it is a
// composite. A plural cannot be guessed reliably (App Mesh's Mesh is
// served as meshes), and a policy target with a wrong plural matches
// nothing, which leaves the kind unrestricted.
type Resolver interface {
	// Resolve returns the kind's resource. ok is false when the resolver
	// does not know the kind; err is for failures to ask.
	Resolve(gvk schema.GroupVersionKind) (k Kind, ok bool, err error)
}

// Guess is the plural a kind's CRD most likely has (policy.GuessResource),
// for kinds no Resolver knows; it stays a guess, and Derive notes every
// one.
func Guess(gvk schema.GroupVersionKind) string {
	return policy.GuessResource(gvk)
}

// Definitions is a Resolver over CustomResourceDefinitions and
// CompositeResourceDefinitions read from files.
type Definitions struct {
	kinds map[schema.GroupKind]Kind
	// schemas are the XRDs' and CRDs' OpenAPI schemas by kind and version.
	schemas map[schema.GroupVersionKind]*Schema
}

// NewDefinitions reads CRDs and XRDs; other objects are ignored, so a
// directory of mixed manifests can be passed whole.
func NewDefinitions(objs []*unstructured.Unstructured) (*Definitions, error) {
	d := &Definitions{kinds: map[schema.GroupKind]Kind{}, schemas: map[schema.GroupVersionKind]*Schema{}}
	for _, o := range objs {
		gv, _ := schema.ParseGroupVersion(o.GetAPIVersion())
		if gv.Group != "apiextensions.k8s.io" && gv.Group != "apiextensions.crossplane.io" {
			continue
		}
		switch o.GetKind() {
		case "CustomResourceDefinition", "CompositeResourceDefinition":
		default:
			continue
		}
		if err := d.add(o); err != nil {
			return nil, errors.Wrapf(err, "%s %s", o.GetKind(), o.GetName())
		}
	}
	return d, nil
}

func (d *Definitions) add(o *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
	if kind == "" || plural == "" {
		return errors.New("spec.names.kind and spec.names.plural are required")
	}
	cats, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "names", "categories")
	xrd := o.GetKind() == "CompositeResourceDefinition"
	class := policy.ClassOf(group, cats, true)
	if xrd {
		class = policy.ClassComposite
	}
	d.kinds[schema.GroupKind{Group: group, Kind: kind}] = Kind{Resource: plural, Class: class}
	if xrd {
		// A v1 XRD's claim kind is a composite too.
		if ck, _, _ := unstructured.NestedString(o.Object, "spec", "claimNames", "kind"); ck != "" {
			cp, _, _ := unstructured.NestedString(o.Object, "spec", "claimNames", "plural")
			d.kinds[schema.GroupKind{Group: group, Kind: ck}] = Kind{Resource: cp, Class: policy.ClassComposite}
		}
	}
	vs, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
	for i, v := range vs {
		vm, _ := v.(map[string]any)
		name, _ := vm["name"].(string)
		raw, ok, _ := unstructured.NestedFieldNoCopy(vm, "schema", "openAPIV3Schema")
		if !ok || name == "" {
			continue
		}
		b, err := json.Marshal(raw)
		if err != nil {
			return errors.Wrapf(err, "spec.versions[%d].schema.openAPIV3Schema", i)
		}
		s := &Schema{}
		if err := json.Unmarshal(b, s); err != nil {
			return errors.Wrapf(err, "spec.versions[%d].schema.openAPIV3Schema", i)
		}
		d.schemas[schema.GroupVersionKind{Group: group, Version: name, Kind: kind}] = s
	}
	return nil
}

// Resolve implements Resolver.
func (d *Definitions) Resolve(gvk schema.GroupVersionKind) (Kind, bool, error) {
	k, ok := d.kinds[gvk.GroupKind()]
	return k, ok, nil
}

// Schema returns the OpenAPI schema a definition gives gvk, nil when none
// does.
func (d *Definitions) Schema(gvk schema.GroupVersionKind) *Schema {
	return d.schemas[gvk]
}

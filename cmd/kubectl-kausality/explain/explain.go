// Package explain is `kubectl kausality explain`: it reads a Claim, XR or
// managed resource, the XR that decides for it, that XR's tree and the
// AllowancePolicies, and prints what internal/why makes of them: for
// each withheld change, the policy and reason that decided and what would
// permit it.
package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/report"
	"github.com/kausality-io/kausality-crossplane/internal/why"
)

// Cmd is `kubectl kausality explain TYPE/NAME [FIELD]`.
type Cmd struct {
	Resource string `arg:"" help:"TYPE/NAME of a Claim, XR or managed resource, as kubectl takes it (xnetworks/shop, instances.ec2.aws.m.upbound.io/shop-db)."`
	Field    string `arg:"" optional:"" help:"Only changes of this field or below or above it, e.g. spec.forProvider.instanceType."`
	Output   string `default:"text" enum:"text,json,yaml" help:"Output format: text, json or yaml." short:"o"`
}

// Help prints examples of explain.
func (c *Cmd) Help() string {
	return `
Examples:
  # Every withheld change of an XR.
  kubectl kausality explain xnetworks/shop

  # Only the changes of one field of a managed resource.
  kubectl kausality explain instances.ec2.aws.m.upbound.io/shop-db spec.forProvider.instanceType

  # As JSON, for a script.
  kubectl kausality explain xstores/shop -o json
`
}

// Run prints which policy decided each withheld change and what would
// permit it.
func (c *Cmd) Run(f *kube.Flags) error {
	s, err := f.Connect()
	if err != nil {
		return err
	}
	return Explain(context.Background(), s.Client, s.Mapper, s.Namespace, c.Resource, c.Field, c.Output, os.Stdout)
}

// Formats Explain writes.
const (
	FormatText = "text"
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// Explain explains the object named by resource (TYPE/NAME) in namespace,
// keeping only changes that concern field when it is set, and writes the
// explanation to w in format.
func Explain(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, field, format string, w io.Writer) error {
	switch format {
	case FormatText, "", FormatJSON, FormatYAML:
	default:
		return errors.Errorf("unknown output format %q: use one of %s", format, strings.Join([]string{FormatText, FormatJSON, FormatYAML}, ", "))
	}
	obj, err := tree.Get(ctx, r, m, namespace, resource, "")
	if err != nil {
		return err
	}
	in, err := Read(ctx, r, obj)
	if err != nil {
		return err
	}
	in.Field = field
	e, err := why.Of(in)
	if err != nil {
		return errors.Wrapf(err, "cannot explain %s", admit.Describe(obj))
	}
	return Print(w, e, format)
}

// Read gathers what explaining obj needs: the XR that decides for it (obj
// itself, a Claim's XR, a managed resource's controller), the objects
// below that XR and the AllowancePolicies. For a managed resource the
// input keeps only what concerns it.
func Read(ctx context.Context, r client.Reader, obj *unstructured.Unstructured) (why.Input, error) {
	var in why.Input
	xr := obj
	switch tree.RoleOf(obj) {
	case report.RoleClaim:
		ref, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "resourceRef")
		if ref["name"] == "" {
			return in, errors.Errorf("%s has no XR yet (spec.resourceRef is empty)", admit.Describe(obj))
		}
		xr = &unstructured.Unstructured{}
		xr.SetAPIVersion(ref["apiVersion"])
		xr.SetKind(ref["kind"])
		xr.SetName(ref["name"])
	case report.RoleManaged:
		owner := metav1.GetControllerOf(obj)
		if owner == nil {
			return in, errors.Errorf("%s has no controller owner: no XR composes it, so Kausality decides nothing for it", admit.Describe(obj))
		}
		xr = &unstructured.Unstructured{}
		xr.SetAPIVersion(owner.APIVersion)
		xr.SetKind(owner.Kind)
		xr.SetNamespace(obj.GetNamespace())
		xr.SetName(owner.Name)
		in.Kind, in.Name = obj.GetKind(), obj.GetName()
	}
	if xr != obj {
		if err := r.Get(ctx, client.ObjectKeyFromObject(xr), xr); err != nil {
			return in, errors.Wrapf(err, "cannot get the XR of %s, %s", admit.Describe(obj), admit.Describe(xr))
		}
	}
	root, err := tree.Read(ctx, r, xr)
	if err != nil {
		return in, err
	}
	root.Walk(func(n *tree.Node) {
		if n != root && !n.Missing {
			in.Composed = append(in.Composed, n.Object)
		}
	})
	in.XR = xr
	ps := &v1alpha1.AllowancePolicyList{}
	switch err := r.List(ctx, ps); {
	case kerrors.IsForbidden(err):
		// A user with namespace rights alone still learns what was
		// withheld and why; which rule would permit it needs the
		// policies, which are cluster-scoped.
		in.PoliciesUnread = "you may not list allowancepolicies.kausality.io"
	case err != nil:
		return in, errors.Wrap(err, "cannot list AllowancePolicies")
	default:
		in.Policies = ps.Items
	}
	return in, nil
}

// Print writes e in format: text, json or yaml.
func Print(w io.Writer, e why.Explanation, format string) error {
	switch format {
	case FormatJSON:
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return errors.Wrap(err, "cannot encode the explanation as JSON")
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case FormatYAML:
		b, err := yaml.Marshal(e)
		if err != nil {
			return errors.Wrap(err, "cannot encode the explanation as YAML")
		}
		_, err = w.Write(b)
		return err
	}
	_, err := io.WriteString(w, e.Text())
	return err
}

// Package explain is `kubectl kausality explain`: it reads a Claim, XR or
// managed resource, the XR that decides for it, that XR's tree and the
// AllowancePolicies, and prints what internal/why makes of them: for
// each withheld change, the policy and reason that decided and what would
// permit it.
package explain

import (
	"context"
	"io"
	"os"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/kube"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/tree"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	"github.com/kausality-io/kausality-crossplane/internal/report"
	"github.com/kausality-io/kausality-crossplane/internal/why"
)

// Cmd is `kubectl kausality explain TYPE/NAME [FIELD]`.
type Cmd struct {
	Resource string         `arg:"" help:"TYPE/NAME of a Claim, XR or managed resource, as kubectl takes it (xnetworks/shop, instances.ec2.aws.m.upbound.io/shop-db)."`
	Field    string         `arg:"" optional:"" help:"Only changes of this field or below or above it, e.g. spec.forProvider.instanceType."`
	Output   printer.Format `default:"default" help:"Output format: default (text), json or yaml." short:"o"`
}

// formats are the -o values explain takes: an explanation is text with no
// columns to add and no tree to draw.
var formats = []printer.Format{printer.FormatDefault, printer.FormatJSON, printer.FormatYAML}

// Validate rejects an -o explain does not print, so that a mistyped one
// fails before anything is read.
func (c *Cmd) Validate() error {
	_, err := printer.New(c.Output, formats...)
	return err
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

// Explain explains the object named by resource (TYPE/NAME) in namespace,
// keeping only changes that concern field when it is set, and writes the
// explanation to w in format.
func Explain(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, field string, format printer.Format, w io.Writer) error {
	p, err := printer.New(format, formats...)
	if err != nil {
		return err
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
	return p.Print(w, explanation{e})
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

// explanation is an Explanation as the printers take it. It embeds the
// Explanation so that its JSON and YAML are the Explanation's own, which
// scripts decode as why.Explanation.
type explanation struct {
	why.Explanation
}

// WriteText writes the explanation as a person reads it; it has no wide
// form.
func (e explanation) WriteText(w io.Writer, _ bool) error {
	_, err := io.WriteString(w, e.Text())
	return errors.Wrap(err, "cannot write the explanation")
}

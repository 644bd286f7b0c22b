// Package explain is `kubectl kausality explain`: it reads a Claim, XR or
// managed resource, the XR that decides for it, that XR's tree and the
// AllowancePolicies, and prints what internal/explain makes of them: for
// each withheld change, the policy and reason that decided and what would
// permit it.
package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/show"
	"github.com/kausality-io/kausality-crossplane/internal/admit"
	why "github.com/kausality-io/kausality-crossplane/internal/explain"
	"github.com/kausality-io/kausality-crossplane/internal/report"
)

// Formats Run writes.
const (
	FormatText = "text"
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// Run explains the object named by resource (TYPE/NAME) in namespace,
// keeping only changes that concern field when it is set, and writes the
// explanation to w in format.
func Run(ctx context.Context, r client.Reader, m meta.RESTMapper, namespace, resource, field, format string, w io.Writer) error {
	switch format {
	case FormatText, "", FormatJSON, FormatYAML:
	default:
		return errors.Errorf("unknown output format %q: use one of %s", format, strings.Join([]string{FormatText, FormatJSON, FormatYAML}, ", "))
	}
	obj, err := show.Get(ctx, r, m, namespace, resource, "")
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
	switch show.RoleOf(obj) {
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
	root, err := show.Read(ctx, r, xr)
	if err != nil {
		return in, err
	}
	root.Walk(func(n *show.Node) {
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

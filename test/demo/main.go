// Command demo is the README's main job. By default it brings up the
// embedded control plane (a real kube-apiserver and etcd, the provider and
// the functions as processes, the recording provider as the cloud) and
// walks the scenarios S1, S2 and S4, printing after each step every
// bucket's gate, what the cloud saw, its trace and the gate timeline.
// With --examples it renders every example with the real `crossplane
// render` instead and prints, per composed resource, gate, allowances and
// trace; --raw prints that render output as it is.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/test/render"
)

func main() {
	examples := flag.Bool("examples", false, "render the examples instead of walking the scenarios on the control plane")
	raw := flag.Bool("raw", false, "with --examples: print the raw `crossplane render` output instead of tables")
	flag.Parse()
	var err error
	if *examples || *raw {
		err = run(os.Stdout, *raw)
	} else {
		err = walk(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, raw bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := render.Root()
	if err != nil {
		return err
	}
	tools, err := render.FindTools(root)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kausality-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // best effort
	fns, err := render.StartFunctions(ctx, root, tmp, tools, render.ExampleFunctions)
	if err != nil {
		return err
	}
	defer fns.Stop()

	cases, err := render.Cases(root)
	if err != nil {
		return err
	}
	for _, c := range cases {
		out, err := c.Render(ctx, tools, fns)
		if err != nil {
			return err
		}
		if raw {
			fmt.Fprintf(w, "# %s: crossplane %s\n%s\n", c.ID(), strings.Join(c.Args(tools, c.Functions()), " "), out)
			continue
		}
		objs, err := render.Objects(out)
		if err != nil {
			return err
		}
		printCase(w, c, objs)
	}
	return nil
}

func printCase(w io.Writer, c render.Case, objs []*unstructured.Unstructured) {
	fmt.Fprintf(w, "\n== %s\n", c.ID())
	if b, err := os.ReadFile(c.Dir + "/README"); err == nil {
		fmt.Fprintf(w, "   %s\n", strings.TrimSpace(string(b)))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tKIND\tGATE (managementPolicies)\tALLOWANCES\tTRACE")
	var results []string
	for _, o := range objs[1:] {
		if o.GetKind() == "Result" {
			if sev, _, _ := unstructured.NestedString(o.Object, "severity"); sev == "Warning" {
				msg, _, _ := unstructured.NestedString(o.Object, "message")
				results = append(results, msg)
			}
			continue
		}
		if o.GetAPIVersion() == "render.crossplane.io/v1beta1" {
			continue
		}
		mp, found, _ := unstructured.NestedStringSlice(o.Object, "spec", "managementPolicies")
		g := "(not gated)"
		if found {
			g = "[" + strings.Join(mp, ", ") + "]"
		}
		ann := o.GetAnnotations()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ann["crossplane.io/composition-resource-name"], o.GetKind(), g,
			allowances(ann[v1alpha1.AnnotationAllowances]), trace(ann[v1alpha1.AnnotationTrace]))
	}
	_ = tw.Flush()
	for _, r := range results {
		fmt.Fprintf(w, "   withheld: %s\n", r)
	}
}

func allowances(s string) string {
	as, err := allowance.Parse(s)
	if err != nil {
		return "(malformed: " + err.Error() + ")"
	}
	if len(as) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(as))
	for _, a := range as {
		p := fmt.Sprintf("%s %s gen %d", a.Relation, strings.Join(a.Verbs, "+"), a.Generation)
		if a.Consumed {
			p += " (consumed)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func trace(s string) string {
	t, err := allowance.ParseTrace(s)
	if err != nil {
		return "(malformed: " + err.Error() + ")"
	}
	if len(t) == 0 {
		return "-"
	}
	hops := make([]string, 0, len(t))
	for _, h := range t {
		hop := fmt.Sprintf("%s/%s@%d", h.Kind, h.Name, h.Generation)
		if h.Field != "" {
			hop += " " + h.Field
		}
		if h.User != "" {
			hop += " by " + h.User
		}
		hops = append(hops, hop)
	}
	return strings.Join(hops, " -> ")
}
